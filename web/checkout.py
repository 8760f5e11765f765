"""Checkout over the operator token, for scripted shops (SPEC 13.4, 13.12): the HTTP side of commerce/checkout.py.

POST /v1/checkout   {customerId, kind, provider, currency, requestId, planId?, addonId?,
                     subscriptionId?, amountMinor?, offerId?, goodsId?}
GET  /checkout/return   where a payer lands after paying at a provider (a page, not the API)

`provider` is yookassa, cryptobot, stars or wallet. The answer (200) names
the order, its status and, by provider, the confirmation URL to send the
payer to or the Stars invoice for the bot; a wallet order is paid at once.
`kind` `goods` with `goodsId` buys digital goods at their catalogue price in
the currency (docs/goods.md).
`requestId` makes a retried request the same checkout (the same order and
the same payment at the provider). Refusals write nothing: 400 for a
malformed request, 403 `customer_blocked` for a customer who is blocked
(by hand or by a blocklist, ops/blocklists.py), 404 for an unknown customer,
plan, add-on, subscription or goods, 409 when the order or the subscription cannot
take it, 422 for what the shop does not sell this way (a plan not priced in
the currency, goods not on sale or whose provider has no usable
token, a provider not configured, a wallet that cannot
cover it, a top-up above APP_TOPUP_MAX_MINOR, an amount above what the
provider takes in one payment), 502 when the provider refused or did not
answer, and 503 `maintenance_active` while maintenance is on.
"""

import bottle

from commerce import checkout
from commerce import orders as order_codes
from commerce.catalogue import ADDON_NOT_FOUND, INVALID_CURRENCY, PLAN_NOT_FOUND
from goods.catalogue import GOODS_NOT_FOUND
from integrations.payments import PROVIDER_HTTP_PREFIX, PROVIDER_REJECTED, PROVIDER_UNAVAILABLE
from web import problems
from web.answers import answered, bearer_refusal, json_answer, json_body, require_schema
from web.problems import Problem

REQUEST_ID_MAX = 64
TEXT_MAX = 200
BIGINT_MAX = 2**63 - 1  # what the database's ids and amounts hold
TEXT_FIELDS = ("customerId", "kind", "provider", "currency", "requestId", "subscriptionId")
INTEGER_FIELDS = ("planId", "addonId", "amountMinor", "offerId", "goodsId")
REQUIRED = ("customerId", "kind", "provider", "currency", "requestId")
STATUS_OF = {
    order_codes.CUSTOMER_BLOCKED: 403,
    order_codes.CUSTOMER_NOT_FOUND: 404,
    order_codes.SUBSCRIPTION_NOT_FOUND: 404,
    PLAN_NOT_FOUND: 404,
    ADDON_NOT_FOUND: 404,
    GOODS_NOT_FOUND: 404,
    checkout.GOODS_REQUIRED: 400,
    order_codes.INVALID_ORDER_KIND: 400,
    order_codes.INVALID_AMOUNT: 400,
    order_codes.UNEXPECTED_FIELD: 400,
    order_codes.SUBSCRIPTION_REQUIRED: 400,
    INVALID_CURRENCY: 400,
    checkout.UNKNOWN_PAYMENT_METHOD: 400,
    order_codes.IDEMPOTENCY_KEY_REUSED: 409,
    order_codes.TRIAL_ALREADY_USED: 409,
    checkout.ORDER_NOT_PAYABLE: 409,
    checkout.NO_CURRENT_ENTITLEMENT: 409,
    checkout.MAINTENANCE_ACTIVE: 503,
    PROVIDER_UNAVAILABLE: 502,
    PROVIDER_REJECTED: 502,
}
RETURN_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Payment</title>"
    "<p>Thank you. Your payment is being confirmed; you can close this page and go back to the shop.</p>"
)


def build(operator_token, providers, public_url, topup_max=None):
    app = bottle.Bottle()
    problems.install(app)

    @app.post("/v1/checkout")
    def start_checkout():
        refusal = bearer_refusal(operator_token)
        if refusal is not None:
            return refusal
        return answered(_checkout, providers, public_url, topup_max)

    @app.get(checkout.RETURN_PATH)
    def payer_returns():
        bottle.response.content_type = "text/html; charset=utf-8"
        return RETURN_PAGE

    return app


def status_of(code):
    if code.startswith(PROVIDER_HTTP_PREFIX):
        return 502
    return STATUS_OF.get(code, 422)


def _checkout(providers, public_url, topup_max):
    request = _request(json_body())
    require_schema(problems.DATABASE_UNAVAILABLE, "the database")
    try:
        result = checkout.checkout(
            providers,
            public_url,
            request["customerId"],
            request["kind"],
            request["provider"],
            request["currency"],
            plan_id=request.get("planId"),
            addon_id=request.get("addonId"),
            subscription_id=request.get("subscriptionId"),
            amount_minor=request.get("amountMinor"),
            offer_id=request.get("offerId"),
            goods_id=request.get("goodsId"),
            key=f"checkout:{request['customerId']}:{request['requestId']}",
            topup_max=topup_max,
        )
    except checkout.CheckoutRejected as rejected:
        raise Problem(status_of(rejected.code), rejected.code, str(rejected)) from None
    return json_answer(
        200,
        {
            "orderId": result.order_id,
            "orderStatus": result.order_status,
            "provider": result.method,
            "amountMinor": result.amount_minor,
            "currency": result.currency,
            "confirmationUrl": result.confirmation_url,
            "invoice": result.invoice,
        },
    )


def _request(body):
    unexpected = sorted(set(body) - set(TEXT_FIELDS) - set(INTEGER_FIELDS))
    if unexpected:
        raise Problem(400, problems.INVALID_BODY, f"unexpected fields: {', '.join(unexpected)[:200]}")
    missing = [name for name in REQUIRED if body.get(name) in (None, "")]
    if missing:
        raise Problem(400, problems.INVALID_BODY, f"required: {', '.join(missing)}")
    for name in TEXT_FIELDS:
        value = body.get(name)
        if name in body and not (isinstance(value, str) and value.isprintable() and len(value) <= TEXT_MAX):
            raise Problem(400, problems.INVALID_BODY, f"{name} is text of at most {TEXT_MAX} characters")
    for name in INTEGER_FIELDS:
        value = body.get(name)
        whole = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= BIGINT_MAX
        if name in body and value is not None and not whole:
            raise Problem(400, problems.INVALID_BODY, f"{name} is a whole number from 0 to {BIGINT_MAX}")
    if len(body["requestId"]) > REQUEST_ID_MAX:
        raise Problem(400, problems.INVALID_BODY, f"requestId is at most {REQUEST_ID_MAX} characters")
    return body
