"""SPEC 1.2: a job is inserted in the transaction of the state change that needs it."""

import pytest

from jobs import JobInsert, insert, insert_many
from models.base import db
from models.jobs import Job


def settle(order_status, fail=False):
    """A settlement-style write: the order row changes and its job is inserted, together."""
    with db.atomic():
        cursor = db.execute_sql(f"INSERT INTO test_orders (status) VALUES ({db.obj.param})", [order_status])
        order_id = (
            cursor.lastrowid if cursor.lastrowid else db.execute_sql("SELECT MAX(id) FROM test_orders").fetchone()[0]
        )
        result = insert("t_unique", {"operationId": order_id})
        if fail:
            raise RuntimeError("settlement failed after the job insert")
    return order_id, result


def test_paid_order_and_its_job_commit_together(database):
    order_id, result = settle("paid")
    assert not result.skipped_as_duplicate
    job = Job.get_by_id(result.job_id)
    assert job.args_dict == {"operationId": order_id}
    assert job.state == "available"
    assert db.execute_sql("SELECT COUNT(*) FROM test_orders").fetchone()[0] == 1


def test_rolled_back_settlement_leaves_neither_order_nor_job(database):
    with pytest.raises(RuntimeError):
        settle("paid", fail=True)
    assert db.execute_sql("SELECT COUNT(*) FROM test_orders").fetchone()[0] == 0
    assert Job.select().count() == 0


def test_multi_row_insert_is_one_statement_and_rolls_back_whole(database):
    executed = []
    original = db.obj.execute_sql

    def counting(sql, params=None, *args, **kwargs):
        if sql.lstrip().upper().startswith("INSERT INTO JOBS"):
            executed.append(sql)
        return original(sql, params, *args, **kwargs)

    db.obj.execute_sql = counting
    try:
        results = insert_many([JobInsert("t_record", {"n": n}) for n in range(50)])
    finally:
        del db.obj.execute_sql
    assert len(executed) == 1
    assert len({result.job_id for result in results}) == 50
    assert [Job.get_by_id(r.job_id).args_dict["n"] for r in results] == list(range(50))

    with pytest.raises(RuntimeError):
        with db.atomic():
            insert_many([JobInsert("t_record", {"n": n}) for n in range(50, 60)])
            raise RuntimeError("dispatcher transaction failed")
    assert Job.select().count() == 50


def test_insert_of_unknown_kind_or_non_object_args_writes_nothing(database):
    with pytest.raises(KeyError):
        insert("no_such_kind", {})
    with pytest.raises(TypeError):
        insert("t_record", ["not", "an", "object"])
    assert Job.select().count() == 0
