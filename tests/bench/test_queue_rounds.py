"""bench.queue's rounds: each system's N lasts the minimum burn-down, and the
reported figures are medians over the rounds with their min and max."""

import argparse

from bench.queue import _round_ratios, sized_jobs, spread, summarise


def _args(jobs=5000, min_burn_s=3.0):
    return argparse.Namespace(jobs=jobs, min_burn_s=min_burn_s)


def _round(jobs_per_s, p50=5.0, p99=9.0, notes="polling", burn_down_s=4.0):
    return {"jobs_per_s": jobs_per_s, "pickup_p50_ms": p50, "pickup_p99_ms": p99, "notes": notes,
            "burn_down_s": burn_down_s}


def test_a_fast_system_gets_an_n_whose_burn_down_lasts_the_minimum_with_a_margin():
    n = sized_jobs(6000.0, _args())
    assert n / 6000.0 >= 3.0 * 1.5
    assert n % 1000 == 0


def test_a_slow_system_keeps_at_least_the_given_n():
    assert sized_jobs(80.0, _args(jobs=5000)) == 5000


def test_the_reported_rate_is_the_median_round_with_min_and_max_beside_it():
    rounds = [_round(1000.0, p50=6.0), _round(3000.0, p50=4.0), _round(1500.0, p50=5.0, notes="polling; slow")]
    summary = summarise("x", rounds)
    assert (summary["jobs_per_s"], summary["jobs_per_s_min"], summary["jobs_per_s_max"]) == (1500.0, 1000.0, 3000.0)
    assert summary["pickup_p50_ms"] == 5.0
    assert summary["notes"] == "polling; slow"  # each distinct note once


def test_calibration_rounds_without_probes_report_no_pickup_figures():
    summary = summarise("x", [_round(1000.0, p50=None, p99=None)])
    assert summary["pickup_p50_ms"] is None and summary["pickup_p99_ms"] is None


def test_per_round_ratios_pair_systems_within_the_same_round():
    per_round = [{"a": {"jobs_per_s": 400.0}, "b": {"jobs_per_s": 100.0}},
                 {"a": {"jobs_per_s": 900.0}, "b": {"jobs_per_s": 300.0}},
                 {"a": {"jobs_per_s": 500.0}}]  # b failed this round: not paired
    assert _round_ratios(per_round, "a", "b") == {"median": 3.5, "min": 3.0, "max": 4.0}
    assert spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
