"""SPEC 5.1, 5.3 for the fulfillment passes run as periodic jobs: a run asked to
stop returns between two of its transactions (what it wrote stays, the rest is
the next run's) and ends cancelled; the dispatch log line reports enqueued and
skipped-as-duplicate counts."""

import datetime
import logging

from commerce.settlement import settle_order
from config.logging import RedactingFormatter
from jobs import current_job, insert
from jobs.passes import fulfillment_reconcile, fulfillment_revive
from models.base import utcnow
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from tests.support import commerce
from tests.support.direct import run_next


def settled(count):
    customer, plan = commerce.customer(), commerce.limited_plan()
    return [settle_order(commerce.order(customer, plan).id, "provider_webhook") for _ in range(count)]


def run_pass(task):
    job_id = insert("periodic_task", {"task": task}).job_id
    assert run_next() == job_id
    return Job.get_by_id(job_id)


def stop_after_first_call(monkeypatch, module, name):
    """Wrap module.name so the running job is asked to stop once it has been called (as at a timeout)."""
    real = getattr(module, name)

    def calling_then_stopping(*args, **kwargs):
        result = real(*args, **kwargs)
        current_job().cancel("asked to stop")
        return result

    monkeypatch.setattr(module, name, calling_then_stopping)


def test_reconcile_run_asked_to_stop_returns_after_the_transaction_it_is_in(database, monkeypatch):
    for settlement in settled(5):
        Entitlement.update(status="active").where(Entitlement.id == settlement.entitlement_id).execute()
    Job.delete().execute()  # the settlements' own jobs are not this test's
    monkeypatch.setattr(fulfillment_reconcile, "TRANSACTION_ROWS", 2)
    stop_after_first_call(monkeypatch, fulfillment_reconcile.jobs, "insert_many")

    job = run_pass("fulfillment_reconcile")

    reconciles = FulfillmentOperation.select().where(FulfillmentOperation.operation == "reconcile")
    assert reconciles.count() == 2  # the first transaction's two, committed; nothing after it
    assert job.state == "cancelled" and job.error_list[-1]["error"] == "asked to stop"


def test_revive_run_asked_to_stop_returns_after_the_transaction_it_is_in(database, monkeypatch):
    stuck = settled(5)
    old = utcnow() - datetime.timedelta(minutes=30)
    FulfillmentOperation.update(created_at=old, next_attempt_at=old).execute()
    Job.delete().where(Job.kind == "fulfillment").execute()  # every operation lost its job
    monkeypatch.setattr(fulfillment_revive, "TRANSACTION_ROWS", 2)
    stop_after_first_call(monkeypatch, fulfillment_revive, "requeue")

    job = run_pass("fulfillment_revive")

    revived = {j.args_dict["operationId"] for j in Job.select().where(Job.kind == "fulfillment")}
    assert revived == {stuck[0].operation_id, stuck[1].operation_id}
    assert job.state == "cancelled"


def dispatch_line(caplog, module):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=module.logger.name):
        counts = module.dispatch()
    (record,) = [r for r in caplog.records if r.name == module.logger.name]
    return counts, RedactingFormatter().format(record)


def test_reconcile_logs_how_many_it_enqueued_and_skipped_as_duplicate(database, caplog):
    for settlement in settled(2):
        Entitlement.update(status="active").where(Entitlement.id == settlement.entitlement_id).execute()
    counts, line = dispatch_line(caplog, fulfillment_reconcile)
    assert counts == (2, 0) and line.endswith("dispatched task=fulfillment_reconcile enqueued=2 skipped_as_duplicate=0")
    counts, line = dispatch_line(caplog, fulfillment_reconcile)  # same bucket: the same jobs
    assert counts == (0, 2) and line.endswith("enqueued=0 skipped_as_duplicate=2")


def test_revive_logs_how_many_it_enqueued_and_skipped_as_duplicate(database, caplog):
    stuck = settled(3)
    old = utcnow() - datetime.timedelta(minutes=30)
    FulfillmentOperation.update(created_at=old, next_attempt_at=old).execute()
    Job.delete().where(Job.args == f'{{"operationId":{stuck[0].operation_id}}}').execute()
    counts, line = dispatch_line(caplog, fulfillment_revive)
    assert counts == (1, 2)
    assert line.endswith("dispatched task=fulfillment_revive enqueued=1 skipped_as_duplicate=2")
    assert "state=" not in line
