"""Telegram Stars refunds through the Bot API's `refundStarPayment` (SPEC 13.4, 13.10).

The bot takes Stars payments itself (commerce/stars.py); what a worker needs
is the one call that gives them back: `refundStarPayment(user_id,
telegram_payment_charge_id)`. It is sent here over the providers' HTTP
exchange (a deadline, an answer cap, no redirect) rather than through
pyTelegramBotAPI, whose API URL is a module global the bot process owns.

Telegram refunds a charge in full and knows no idempotence key, so the
charge itself is the key: a second call for a charge already refunded is
answered `CHARGE_ALREADY_REFUNDED`, which here means the refund stands (a
worker that crashed after Telegram refunded, and calls again, records
success and never pays twice). The bot token sits in the request path, so
no error of this module carries a URL or an answer body: only its code and
Telegram's own error word.
"""

import json

from integrations.payments import (
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    REFUND_UNSUPPORTED,
    STATUS_SUCCEEDED,
    PaymentProvider,
    ProviderError,
    ProviderRefund,
    http_error_code,
)
from integrations.payments.http import REQUEST_TIMEOUT_S, ProviderHttp

PROVIDER = "stars"
CURRENCY = "XTR"
INVOICE_MAX_AMOUNT = 10000  # Telegram's limit on one Stars invoice (currencies.json's max_amount for XTR)
ALREADY_REFUNDED = "CHARGE_ALREADY_REFUNDED"
DETAIL_UNDECODABLE = "undecodable"


class StarsRefunds(PaymentProvider):
    """The Stars side a worker calls: refunds only (payments arrive through the bot's updates)."""

    name = PROVIDER
    webhooks_signed = True
    supports_refunds = True

    def __init__(self, token, api_url, timeout=REQUEST_TIMEOUT_S):
        if not token:
            raise ValueError("a Telegram bot token is required")
        self._token = token
        self._http = ProviderHttp(PROVIDER, api_url, timeout=timeout)

    def create_payment(self, **_):
        raise ProviderError(PROVIDER_REJECTED, provider=PROVIDER)  # the bot sends Stars invoices

    def fetch_payment(self, payment_id):
        raise ProviderError(PROVIDER_REJECTED, provider=PROVIDER)

    def parse_webhook(self, body, headers):
        raise ProviderError(PROVIDER_REJECTED, provider=PROVIDER)

    def refund(self, *, payment_id, amount_minor, currency, idempotence_key, description=None, payer_id=None):
        """Refund charge `payment_id` of Telegram user `payer_id` in full; `amount_minor` is the charge's."""
        if currency != CURRENCY or payer_id is None:
            raise ProviderError(REFUND_UNSUPPORTED, provider=PROVIDER)
        answer = self._http.send(
            "POST",
            f"/bot{self._token}/refundStarPayment",
            {"Content-Type": "application/json", "Accept": "application/json"},
            json_body={"user_id": int(payer_id), "telegram_payment_charge_id": str(payment_id)},
        )
        try:
            payload = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            payload = None
        if not isinstance(payload, dict):
            if answer.status >= 500 or answer.status == 429:
                raise ProviderError(http_error_code(answer.status), provider=PROVIDER, status=answer.status)
            raise ProviderError(
                PROVIDER_UNAVAILABLE, provider=PROVIDER, status=answer.status, detail=DETAIL_UNDECODABLE
            )
        word = _error_word(payload.get("description"))
        if payload.get("ok") is True or (answer.status == 400 and word == ALREADY_REFUNDED):
            return ProviderRefund(PROVIDER, str(payment_id), str(payment_id), STATUS_SUCCEEDED, amount_minor, currency)
        code = PROVIDER_REJECTED if answer.status == 400 else http_error_code(answer.status)
        raise ProviderError(code, provider=PROVIDER, status=answer.status, provider_error_code=word)


def _error_word(description):
    """Telegram's error word (`Bad Request: CHARGE_NOT_FOUND` → CHARGE_NOT_FOUND), never free text."""
    text = str(description or "").rsplit(":", 1)[-1].strip()
    return text if text and text.replace("_", "").isalnum() and text.isupper() and len(text) <= 64 else None
