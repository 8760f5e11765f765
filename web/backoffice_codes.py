"""The back office's gift cards, access codes and personal offers (SPEC 13.11, 13.14): an operator issues them.

POST /v1/panel/gift-cards   {planId, validDays, count?}                  single-use gift cards (count, 1 by default)
POST /v1/panel/access-codes {planId, maxActivations, validDays?, code?, count?}
                                                                         access codes (generated unless chosen)
POST /v1/panel/gift-cards/{id}/revoke, /v1/panel/access-codes/{id}/revoke
                                                                         revoke one: it activates nothing after
POST /v1/panel/customers/{c}/offers {discountPercent | discountMinor + currency, planId?, validDays}
                                                                         a personal offer (commerce/offers.py)

Both need `payments.write` (a code is worth a period) and `X-Operator-Reason`,
and are audited in the transaction that makes them. The code is in the 201
answer once: only its SHA-256 is stored (commerce/codes.py), so the audit,
the logs and every later answer carry the card's or code's id, never the
code. A batch (`count` up to MAX_BATCH, one transaction, one audit row per
card or code) answers every code under `issued`; the codes page
(/panel/codes, web/templates/codes.tpl) shows them once and builds their CSV
in the browser from that answer, so no plain code is kept anywhere, even for
a download. A revocation needs `payments.write` and a reason, is audited,
and refuses a second revocation (`already_revoked`, 409). Customers
activate them through commerce/activations.py. An offer needs
`payments.write` too (it takes money off orders): a bad discount or expiry
is a 400 (`invalid_discount`, `invalid_validity`) that writes nothing.
"""

import datetime

from commerce import codes, offers
from commerce.catalogue import CatalogueError, purchasable_plan
from models.base import db, utcnow
from models.catalogue import AccessCode, GiftCard
from ops import operators
from ops.records import record_audit
from web import backoffice, panel, problems
from web.answers import iso, json_answer, json_body
from web.problems import Problem

CATEGORY = "payments"
GIFT_CARD_ISSUED = "panel.gift_card.issued"
ACCESS_CODE_ISSUED = "panel.access_code.issued"
GIFT_CARD_REVOKED = "panel.gift_card.revoked"
ACCESS_CODE_REVOKED = "panel.access_code.revoked"
GIFT_CARD_NOT_FOUND = "gift_card_not_found"
ACCESS_CODE_NOT_FOUND = "access_code_not_found"
INVALID_COUNT = "invalid_count"
MAX_BATCH = 1000
OFFER_CREATED = "panel.personal_offer.created"
MAX_VALID_DAYS = 3650
MAX_ACTIVATIONS = 1_000_000
MAX_CHOSEN_CODE = 64
PROBLEMS = {
    codes.INVALID_CODE: 400,
    codes.INVALID_ACTIVATION_LIMIT: 400,
    codes.CODE_TAKEN: 409,
    codes.ALREADY_REVOKED: 409,
}


def gift_card_json(card):
    return {
        "id": card.id,
        "planId": card.plan_id,
        "status": card.status,
        "expiresAt": iso(card.expires_at),
        "createdAt": iso(card.created_at),
        "revokedAt": iso(card.revoked_at),
    }


def access_code_json(row):
    return {
        "id": row.id,
        "planId": row.plan_id,
        "maxActivations": row.max_activations,
        "activationCount": row.activation_count,
        "active": bool(row.active),
        "expiresAt": iso(row.expires_at),
        "createdAt": iso(row.created_at),
        "revokedAt": iso(row.revoked_at),
    }


def offer_json(offer):
    return {
        "id": offer.id,
        "customerId": offer.customer_id,
        "planId": offer.plan_id,
        "discountPercent": offer.discount_percent,
        "discountMinor": offer.discount_minor,
        "currency": offer.currency,
        "status": offer.status,
        "expiresAt": iso(offer.expires_at),
        "usedOrderId": offer.used_order_id,
        "createdAt": iso(offer.created_at),
    }


def _whole(value, low, high):
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def _plan(body):
    plan_id = body.get("planId")
    if not _whole(plan_id, 1, 2**63 - 1):
        raise Problem(400, problems.INVALID_PLAN_ID, "planId is a plan's id")
    try:
        return purchasable_plan(plan_id)
    except CatalogueError as error:
        raise Problem(404 if error.code == problems.PLAN_NOT_FOUND else 409, error.code, str(error)) from None


def _expiry(body, required):
    days = body.get("validDays")
    if days is None and not required:
        return None
    if not _whole(days, 1, MAX_VALID_DAYS):
        raise Problem(400, problems.INVALID_VALIDITY, f"validDays is a whole number from 1 to {MAX_VALID_DAYS}")
    return utcnow().replace(microsecond=0) + datetime.timedelta(days=days)


def _count(body):
    count = body.get("count", 1)
    if not _whole(count, 1, MAX_BATCH):
        raise Problem(400, INVALID_COUNT, f"count is a whole number from 1 to {MAX_BATCH}")
    return count


def _issued(key, as_json, issued):
    """The 201 of a batch: the first row and its code (as before batches), and every (id, code) under `issued`."""
    first, code = issued[0]
    return json_answer(201, {key: as_json(first), "code": code, "issued": [{"id": r.id, "code": c} for r, c in issued]})


def _revoke(operator, model, key, action, subject):
    reason = panel.operator_reason()
    if not key.isdigit() or int(key) > 2**63 - 1:
        raise Problem(404, GIFT_CARD_NOT_FOUND if subject == "gift_card" else ACCESS_CODE_NOT_FOUND, "no such code")
    try:
        with db.atomic():
            row = codes.revoke(model, int(key), reason, utcnow())
            if row is None:
                raise Problem(404, GIFT_CARD_NOT_FOUND if subject == "gift_card" else ACCESS_CODE_NOT_FOUND,
                              "no such code")  # fmt: skip
            record_audit(CATEGORY, action, f"operator:{operator.username}", reason, subject, row.id,
                         details={"planId": row.plan_id})  # fmt: skip
    except codes.CodeRejected as rejected:
        raise Problem(PROBLEMS.get(rejected.code, 400), rejected.code, str(rejected)) from None
    return row


def build():
    import bottle

    app = bottle.Bottle()
    signed_in = panel.signed_in

    @app.post("/v1/panel/gift-cards")
    @signed_in(operators.PAYMENTS_WRITE)
    def issue_gift_card(operator):
        reason = panel.operator_reason()
        body = json_body()
        plan = _plan(body)
        expires_at = _expiry(body, required=True)
        count = _count(body)
        issued = []
        with db.atomic():
            for _ in range(count):
                card, code = codes.issue_gift_card(plan, expires_at)
                record_audit(CATEGORY, GIFT_CARD_ISSUED, f"operator:{operator.username}", reason, "gift_card",
                             card.id, details={"planId": plan.id, "expiresAt": iso(expires_at)})  # fmt: skip
                issued.append((card, code))
        return _issued("giftCard", gift_card_json, issued)

    @app.post("/v1/panel/access-codes")
    @signed_in(operators.PAYMENTS_WRITE)
    def issue_access_code(operator):
        reason = panel.operator_reason()
        body = json_body()
        plan = _plan(body)
        limit = body.get("maxActivations")
        if not _whole(limit, 1, MAX_ACTIVATIONS):
            raise Problem(400, codes.INVALID_ACTIVATION_LIMIT, f"maxActivations is from 1 to {MAX_ACTIVATIONS}")
        expires_at = _expiry(body, required=False)
        chosen = body.get("code")
        if chosen is not None and (not isinstance(chosen, str) or len(chosen) > MAX_CHOSEN_CODE):
            raise Problem(400, codes.INVALID_CODE, f"code is a text of at most {MAX_CHOSEN_CODE} characters")
        count = _count(body)
        if chosen is not None and count != 1:
            raise Problem(400, INVALID_COUNT, "a chosen code is issued once: leave count out or make it 1")
        issued = []
        try:
            with db.atomic():
                for _ in range(count):
                    row, code = codes.issue_access_code(plan, limit, expires_at, chosen)
                    record_audit(CATEGORY, ACCESS_CODE_ISSUED, f"operator:{operator.username}", reason,
                                 "access_code", row.id, details={"planId": plan.id, "maxActivations": limit,
                                 "expiresAt": iso(expires_at), "chosen": chosen is not None})  # fmt: skip
                    issued.append((row, code))
        except codes.CodeRejected as rejected:
            raise Problem(PROBLEMS.get(rejected.code, 400), rejected.code, str(rejected)) from None
        return _issued("accessCode", access_code_json, issued)

    @app.post("/v1/panel/gift-cards/<card_id>/revoke")
    @signed_in(operators.PAYMENTS_WRITE)
    def revoke_gift_card(operator, card_id):
        card = _revoke(operator, GiftCard, card_id, GIFT_CARD_REVOKED, "gift_card")
        return json_answer(200, {"giftCard": gift_card_json(card)})

    @app.post("/v1/panel/access-codes/<code_id>/revoke")
    @signed_in(operators.PAYMENTS_WRITE)
    def revoke_access_code(operator, code_id):
        row = _revoke(operator, AccessCode, code_id, ACCESS_CODE_REVOKED, "access_code")
        return json_answer(200, {"accessCode": access_code_json(row)})

    @app.post("/v1/panel/customers/<customer_id>/offers")
    @signed_in(operators.PAYMENTS_WRITE)
    def create_offer(operator, customer_id):
        reason = panel.operator_reason()
        customer = backoffice.customer_or_404(customer_id)
        body = json_body()
        plan = _plan(body) if body.get("planId") is not None else None
        try:
            with db.atomic():
                offer = offers.create_offer(
                    customer, body.get("validDays"), plan, body.get("discountPercent"), body.get("discountMinor"),
                    body.get("currency"),
                )  # fmt: skip
                record_audit(CATEGORY, OFFER_CREATED, f"operator:{operator.username}", reason, "personal_offer",
                             offer.id, details=offer_json(offer))  # fmt: skip
        except offers.OfferRejected as rejected:
            raise Problem(400, rejected.code, str(rejected)) from None
        return json_answer(201, {"offer": offer_json(offer)})

    return app
