"""The chaos run (bench/chaos.py) as a test: 500 orders settled while the panel
fails 30 % of calls and loses 5 % of answers after applying them, with a
worker process SIGKILLed mid-run and replaced. Every paid order must end with
exactly one panel user, no create applied twice, and every attempt explained.
The operation leases the killed worker held end when it dies (their two-minute
expiry, compressed; `python -m bench.chaos` waits it out).

The same run behind a transaction-pooling PgBouncer (SPEC 1.12): every pooled
connection, the workers' and the harness's, goes through it, and the workers
LISTEN on DATABASE_DIRECT_URL. Fewer orders, the test worker's fast rescue,
and the killed worker's operation leases ended at once, so it converges in
seconds instead of after the two-minute lease."""

import pytest

from bench import chaos

pytestmark = pytest.mark.processes(seconds=70)

POOLED_ORDERS = 60
FAST_WORKER = ("-m", "tests.support.worker", "--app-kinds", "--fast-rescue", "--shutdown-timeout", "5")


def assert_converged_exactly_once(figures, orders, timeout_s, log_dir):
    print(figures)
    assert figures["converge_s"] is not None, f"not converged in {timeout_s} s; worker logs in {log_dir}"
    assert figures["worker_killed_at_s"] is not None
    assert figures["duplicate_users"] == 0
    assert figures["double_applied_creates"] == 0
    assert figures["lost_orders"] == 0
    assert figures["subscriptions_without_user"] == 0
    assert figures["unexplained_attempts"] == 0
    assert figures["panel_calls"]["POST /api/users"] >= orders


def test_chaos_run_converges_with_one_user_per_subscription_and_no_double_create(database, database_url, tmp_path):
    # Production workers; the killed worker's operation leases end when it dies, as their expiry
    # would two minutes later (bench.chaos waits the two minutes out).
    figures = chaos.run(database_url, orders=500, timeout_s=280, log_dir=tmp_path, expire_killed_leases=True)
    assert_converged_exactly_once(figures, 500, 280, tmp_path)


@pytest.mark.processes(seconds=35)
def test_chaos_run_through_a_transaction_pooler_converges_with_one_user_per_subscription(
    pg_database, pg_url, pgbouncer, tmp_path
):
    figures = chaos.run(
        pgbouncer.pooled(pg_url),
        orders=POOLED_ORDERS,
        timeout_s=60,
        log_dir=tmp_path,
        worker_argv=FAST_WORKER,
        worker_env={"DATABASE_DIRECT_URL": pg_url},
        expire_killed_leases=True,
    )
    print(pgbouncer.log())
    assert_converged_exactly_once(figures, POOLED_ORDERS, 60, tmp_path)
    assert pgbouncer.transactions(pg_url) > figures["attempts"]  # the workers' transactions went through it
