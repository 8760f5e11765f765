"""The back office's anomaly rules (SPEC 15.7): System → Anomalies, and its API.

GET /v1/panel/system/anomaly-rules          every rule: threshold, window, enabled, its measure now (system.read)
PUT /v1/panel/system/anomaly-rules/{rule}   {threshold?, windowMinutes?, enabled?}   (system.write, X-Operator-Reason)

A change is checked against the rule's unit (ops/anomalies.py): a bad value
is a 400 with its code (`invalid_threshold`, `invalid_window`,
`invalid_enabled`), an unknown rule a 404, and neither writes anything. A
change is audited (`panel.anomaly_rule.changed`, with the values before and
after) in its own transaction. The page shows each rule's current measure
and the latest `anomaly` notices.
"""

import datetime
import json

import bottle

from models.base import utcnow
from models.ops import OperatorNotice
from ops import anomalies, operators
from web import panel
from web.answers import iso, json_answer, json_body
from web.pages import page, render
from web.problems import Problem

RECENT_NOTICES = 20


def rule_json(row, now=None):
    rule, measure = anomalies.RULES[row.rule]
    now = now or utcnow()
    value = measure(now - datetime.timedelta(seconds=row.window_s), now)
    return {
        "rule": row.rule,
        "unit": rule.unit,
        "breachedWhen": rule.breached_when,
        "threshold": row.threshold,
        "windowMinutes": row.window_s // 60,
        "enabled": bool(row.enabled),
        "current": value,
        "breached": bool(row.enabled) and rule.breached(value, row.threshold),
        "updatedAt": iso(row.updated_at),
        "updatedBy": row.updated_by,
    }


def build():
    app = bottle.Bottle()

    @app.get("/v1/panel/system/anomaly-rules")
    @panel.signed_in(operators.SYSTEM_READ)
    def list_rules(operator):
        now = utcnow()
        return json_answer(200, {"rules": [rule_json(row, now) for row in anomalies.stored_rules()]})

    @app.put("/v1/panel/system/anomaly-rules/<rule>")
    @panel.signed_in(operators.SYSTEM_WRITE)
    def change_rule(operator, rule):
        reason = panel.operator_reason()
        body = json_body()
        try:
            row = anomalies.change_rule(rule[:64], body, f"operator:{operator.username}", reason)
        except anomalies.RuleRejected as rejected:
            status = 404 if rejected.code == anomalies.UNKNOWN_RULE else 400
            raise Problem(status, rejected.code, str(rejected)) from None
        return json_answer(200, {"rule": rule_json(row)})

    @app.get("/panel/system/anomalies")
    @page(operators.SYSTEM_READ)
    def anomalies_page(operator):
        now = utcnow()
        recent = (
            OperatorNotice.select()
            .where(OperatorNotice.kind == anomalies.NOTICE_KIND)
            .order_by(OperatorNotice.id.desc())
            .limit(RECENT_NOTICES)
        )
        return render(
            "anomalies",
            operator=operator,
            rules=[rule_json(row, now) for row in anomalies.stored_rules()],
            notices=[(notice, json.loads(notice.payload)) for notice in recent],
            can_write=operators.SYSTEM_WRITE in operator.permission_set,
        )

    return app
