"""SPEC 5.1, 5.2, 5.3: the commerce passes are declared with the table's intervals and timeouts,
with or without a data key, and payment_reconcile's polls are jobs unique by their intent."""

import importlib

import omniflow
from commerce.passes import payment_reconcile
from jobs import INTERVAL, UNIQUE_WHILE_ACTIVE, huey

# SPEC 5.1's table: (interval in seconds, timeout).
TABLE = {
    "commerce_maintenance": (60, INTERVAL),
    "payment_reconcile": (60, INTERVAL),
    "renewal": (60, 5 * 60),
    "lifecycle_sweep": (5 * 60, INTERVAL),
}


def test_the_commerce_passes_run_at_the_intervals_and_timeouts_of_the_spec():
    assert {f"commerce.passes.{name}" for name in TABLE} <= set(omniflow.JOB_KIND_MODULES)
    for module in omniflow.JOB_KIND_MODULES:  # what every worker declares, key or none
        importlib.import_module(module)
    declared = {
        name: (spec.schedule.seconds, spec.timeout)
        for name, spec in huey.periodic_schedules.items()
        if name in TABLE
    }
    assert declared == TABLE


def test_a_poll_job_is_unique_by_its_intent_while_it_has_not_finished():
    spec = huey.kinds.get(payment_reconcile.POLL_KIND)
    assert spec.unique_states == UNIQUE_WHILE_ACTIVE
    assert spec.unique_key({"intentId": 7}) == spec.unique_key({"intentId": 7}) != spec.unique_key({"intentId": 8})
