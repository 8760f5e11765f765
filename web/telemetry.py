"""The telemetry collector's endpoint (SPEC 15.9): POST /v1/telemetry/heartbeat.

Only in collector mode (APP_TELEMETRY_COLLECTOR); otherwise it answers 404
`telemetry_collector_off`. Installations send no credentials (a heartbeat
names nobody), so the endpoint takes exactly the heartbeat's shape
(ops/telemetry.py `check_heartbeat`), at most the JSON body limit, and
anything else is a 400 `invalid_heartbeat` that writes nothing.
"""

import bottle

from ops import telemetry
from web import problems
from web.answers import answered, json_answer, json_body, require_schema
from web.problems import Problem

PATH = "/v1/telemetry/heartbeat"


def build(collector):
    app = bottle.Bottle()
    problems.install(app)

    @app.post(PATH)
    def receive_heartbeat():
        return answered(_receive, collector)

    return app


def _receive(collector):
    if not collector:
        raise Problem(404, problems.TELEMETRY_COLLECTOR_OFF, "this installation does not collect telemetry")
    body = json_body()
    require_schema(problems.DATABASE_UNAVAILABLE, "the database")
    try:
        event = telemetry.store(body)
    except telemetry.HeartbeatRefused as refused:
        raise Problem(400, refused.code, str(refused)) from None
    return json_answer(202, {"id": event.id})
