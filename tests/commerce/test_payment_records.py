"""SPEC 13.5, 13.6: one provider payment id per provider (for Stars, the
telegram_payment_charge_id), webhook bodies stored raw and capped at 64 KiB."""

import datetime

import pytest
from peewee import IntegrityError

from models.base import db, utcnow
from models.payments import WEBHOOK_BODY_LIMIT, PaymentIntent, ProviderWebhookEvent
from tests.support import commerce


def intent(order, provider, payment_id, key):
    return PaymentIntent.create(
        order=order,
        provider=provider,
        provider_payment_id=payment_id,
        amount_minor=order.amount_minor,
        currency=order.currency,
        idempotence_key=key,
    )


def test_a_provider_payment_id_settles_one_intent_per_provider(database):
    order = commerce.order(commerce.customer(), commerce.priced_plan())
    intent(order, "stars", "charge-1", "k1")
    with pytest.raises(IntegrityError):
        with db.atomic():
            intent(order, "stars", "charge-1", "k2")  # the same successful_payment delivered twice
    intent(order, "cryptobot", "charge-1", "k3")  # another provider's ids are its own
    intent(order, "yookassa", None, "k4")  # not yet created at the provider
    intent(order, "yookassa", None, "k5")
    assert PaymentIntent.select().count() == 4
    with pytest.raises(IntegrityError):
        with db.atomic():
            intent(order, "yookassa", "p-9", "k1")  # one Idempotence-Key, one payment


def test_a_webhook_body_is_stored_raw_up_to_64_kib(database):
    received = utcnow()
    body = b'{"event":"payment.succeeded","object":{"id":"p-1"}}\xff'
    event = ProviderWebhookEvent.create(
        provider="yookassa",
        provider_event_id="p-1",
        signature_ok=True,
        retain_until=received + datetime.timedelta(days=30),
        body=body,
    )
    assert bytes(ProviderWebhookEvent.get_by_id(event.id).body) == body
    ProviderWebhookEvent.create(
        provider="cryptobot", signature_ok=False, retain_until=received, body=b"x" * WEBHOOK_BODY_LIMIT
    )
    with pytest.raises(IntegrityError):
        with db.atomic():
            ProviderWebhookEvent.create(
                provider="cryptobot", signature_ok=False, retain_until=received, body=b"x" * (WEBHOOK_BODY_LIMIT + 1)
            )
    assert ProviderWebhookEvent.select().count() == 2
