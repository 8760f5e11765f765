"""Operator accounts in the panel (SPEC 4.5), for whoever holds `operators.write`:

GET  /v1/panel/operators                          every operator: permissions, disabled or not, live sessions
POST /v1/panel/operators/{id}/disable             no more sign-in; their sessions end now (X-Operator-Reason)
POST /v1/panel/operators/{id}/enable              sign-in allowed again (X-Operator-Reason)
POST /v1/panel/operators/{id}/revoke-sessions     every session of theirs ends now (X-Operator-Reason)
POST /v1/panel/operators/{id}/password {password} a new password; their sessions end (X-Operator-Reason)
GET  /panel/operators                             the page with those actions, each asking for a reason

The rules and the audit events (with the reason, never a password) are
ops/operators.py's, shared with `omniflow.py operators`.
"""

import bottle

from models.operators import Operator
from ops import operators
from security.passwords import WeakPassword
from web import panel, problems
from web.answers import id_param, iso, json_answer, json_body
from web.pages import page, render
from web.problems import Problem


def operator_json(operator, sessions):
    return {
        "id": operator.id,
        "username": operator.username,
        "permissions": sorted(operator.permission_set),
        "createdAt": iso(operator.created_at),
        "disabledAt": iso(operator.disabled_at),
        "liveSessions": sessions.get(operator.id, 0),
    }


def accounts():
    return list(Operator.select().order_by(Operator.username))


def operator_or_404(raw):
    operator_id = id_param(raw, problems.INVALID_OPERATOR_ID, "an operator id")
    found = Operator.get_or_none(Operator.id == operator_id)
    if found is None:
        raise Problem(404, problems.OPERATOR_NOT_FOUND, f"operator {operator_id} does not exist")
    return found


def build():
    app = bottle.Bottle()
    problems.install(app)

    @app.get("/v1/panel/operators")
    @panel.signed_in(operators.OPERATORS_WRITE)
    def listing(operator):
        sessions = operators.live_sessions()
        return json_answer(200, {"operators": [operator_json(o, sessions) for o in accounts()]})

    def change(act):
        def route(operator, operator_id):
            target = operator_or_404(operator_id)
            reason = panel.operator_reason()
            try:
                act(target, f"operator:{operator.username}", reason)
            except operators.OperatorError as refused:
                raise Problem(409, problems.STATE_CONFLICT, str(refused)) from None
            except WeakPassword as weak:
                raise Problem(400, problems.WEAK_PASSWORD, str(weak)) from None
            target = Operator.get_by_id(target.id)
            return json_answer(200, {"operator": operator_json(target, operators.live_sessions())})

        return panel.signed_in(operators.OPERATORS_WRITE)(route)

    def new_password(target, actor, reason):
        password = json_body().get("password")
        if not isinstance(password, str) or not password or len(password) > 1024:
            raise Problem(400, problems.INVALID_BODY, "password is a required string")
        operators.reset_password(target, password, actor, reason)

    app.post("/v1/panel/operators/<operator_id>/disable")(change(operators.disable_operator))
    app.post("/v1/panel/operators/<operator_id>/enable")(change(operators.enable_operator))
    app.post("/v1/panel/operators/<operator_id>/revoke-sessions")(change(operators.revoke_sessions))
    app.post("/v1/panel/operators/<operator_id>/password")(change(new_password))

    @app.get("/panel/operators")
    @page(operators.OPERATORS_WRITE)
    def operators_page(operator):
        return render("operators", operator=operator, accounts=accounts(), sessions=operators.live_sessions())

    return app
