"""Payment providers' webhooks (SPEC 13.6): the HTTP side of commerce/webhooks.py.

POST /v1/webhooks/yookassa     YooKassa notifications (unsigned: confirmed by fetching the payment)
POST /v1/webhooks/cryptobot    Crypto Pay updates (header crypto-pay-api-signature)

No operator credentials: a delivery proves itself (a signature, or the
provider's API confirming it, which the delivery's job asks). A body over
64 KiB is refused with 413 before anything is written; a provider this shop
has not configured is a 404 and nothing is written either. Every other
delivery is stored first and answered at once: 200 `{"outcome": "accepted"}`
when it is stored with the job that confirms and applies it (the provider
need not deliver it again), 200 `{"outcome": "replayed"}` for an event
already applied, 401 for a bad signature, 400 for a malformed one, 503 when
the database cannot store it (the provider delivers again). Maintenance never
refuses a webhook (SPEC 13.12). A body is never logged or echoed.
"""

import bottle

from commerce import webhooks
from commerce.providers import HOSTED, PROVIDER_NOT_CONFIGURED
from integrations.payments import BAD_SIGNATURE, MALFORMED_WEBHOOK
from models.payments import WEBHOOK_BODY_LIMIT
from web import problems
from web.answers import answered, client_address, json_answer, plain_digits, require_schema
from web.problems import Problem

BODY_TOO_LARGE = problems.BODY_TOO_LARGE
DETAILS = {
    BAD_SIGNATURE: "the delivery's signature does not verify",
    MALFORMED_WEBHOOK: "the delivery is not one of this provider's documented notifications",
}


def build(providers):
    app = bottle.Bottle()
    problems.install(app)
    for name in HOSTED:
        app.post(f"/v1/webhooks/{name}", callback=_intake(providers, name))
    return app


def _intake(providers, name):
    def route():
        return answered(_receive, providers.get(name), name)

    return route


def _receive(adapter, name):
    if adapter is None:
        raise Problem(404, PROVIDER_NOT_CONFIGURED, f"{name} is not configured here")
    body = _capped_body()
    require_schema(problems.DATABASE_UNAVAILABLE, "the database")
    intake = webhooks.receive(adapter, body, bottle.request.headers, client_address())
    if intake.status == 200:
        return json_answer(200, {"outcome": intake.outcome})
    raise Problem(intake.status, intake.outcome, DETAILS[intake.outcome])


def _capped_body():
    """The raw body, or a 413 when it is over the cap (read no further than the cap and one byte)."""
    declared = bottle.request.get_header("Content-Length", "")
    if declared and plain_digits(declared) and int(declared) > WEBHOOK_BODY_LIMIT:
        raise Problem(413, BODY_TOO_LARGE, f"a webhook body is at most {WEBHOOK_BODY_LIMIT} bytes")
    body = bottle.request.body.read(WEBHOOK_BODY_LIMIT + 1)
    if len(body) > WEBHOOK_BODY_LIMIT:
        raise Problem(413, BODY_TOO_LARGE, f"a webhook body is at most {WEBHOOK_BODY_LIMIT} bytes")
    return body
