"""The benchmarks' figures: per-tenth rates of a long burn-down, each round's starting
table state, and webhook runs that ran out of prepared deliveries reported as such."""

from bench import sustained
from bench.harness import tenth_rates
from bench.queue import summarise
from bench.webhooks import RAN_OUT, figures, median_of


def _result(jobs_per_s, tenths, start_dead=0):
    return {"jobs_per_s": jobs_per_s, "pickup_p50_ms": None, "pickup_p99_ms": None, "notes": "",
            "burn_down_s": 10.0, "tenths": tenths, "end_to_start": round(tenths[-1] / tenths[0], 3),
            "start_dead_tuples": start_dead, "end_dead_tuples": 5}


def test_each_tenth_of_a_burn_down_has_its_rate_and_the_first_starts_at_the_first_job_done():
    ends = [10.0 + k for k in range(1, 11)]  # a tenth (100 jobs) a second after the first job at 10.0
    rates = tenth_rates(1000, 10.0, ends)
    assert rates[0] == 99.0 and rates[1:] == [100.0] * 9


def test_a_burn_down_too_short_to_split_in_tenths_reports_none():
    assert tenth_rates(5, 1.0, [0.0] * 10) == []


def test_a_sustained_system_reports_the_median_of_its_rounds_and_how_each_round_started():
    rounds = [_result(900.0, [1000.0] + [900.0] * 9), _result(700.0, [800.0] + [400.0] * 9, start_dead=0)]
    figures_ = sustained.summarise(rounds)
    assert figures_["jobs_per_s"] == 800.0
    assert figures_["end_to_start"] == round((0.9 + 0.5) / 2, 3)
    assert figures_["tenths"][0] == 900.0 and figures_["start_dead_tuples"] == [0, 0]


def test_the_sustained_targets_name_what_was_met():
    systems = {"omniflow-pg": {"jobs_per_s": 5000.0, "end_to_start": 0.85},
               "huey-postgres": {"jobs_per_s": 3000.0, "end_to_start": 0.9}}
    verdict = sustained.verdict(systems, "off")
    assert verdict["end_to_start_met"] and not verdict["vs_huey_postgres_met"]
    assert "note" in sustained.verdict(systems, "on")


def test_queue_rounds_record_the_dead_row_versions_each_round_started_with():
    summary = summarise("omniflow-pg", [_result(100.0, [1.0] * 10, start_dead=0), _result(90.0, [1.0] * 10)])
    assert summary["start_dead_tuples"] == [0, 0]


def test_a_webhook_run_whose_prepared_deliveries_ran_out_is_no_measurement_and_says_why():
    results = [("yookassa", 0.010, True), ("cryptobot", 0.020, True), ("exhausted", 0.0, False)]
    run = figures(results, 10)
    assert run["rps"] is None and run["p99_ms"] is None and run["unmeasured"] == RAN_OUT
    assert run["errors"] == 0  # running out is not a failed request


def test_webhook_medians_skip_runs_that_measured_nothing():
    assert median_of([None, 400.0, 600.0]) == 500.0
    assert median_of([None, None]) is None
