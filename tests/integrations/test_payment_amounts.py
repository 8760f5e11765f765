"""SPEC 13: money is integer minor units; a provider's decimal text converts to them exactly or not at all."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from integrations.payments.amounts import (
    CRYPTO_PAY_DECIMALS,
    CRYPTO_PRECISION_CAP,
    EXPONENTS,
    AmountError,
    exponent,
    to_decimal_text,
    to_minor,
)


def test_each_currency_has_its_exponent_rub_usd_eur_two_stars_none_crypto_at_crypto_pays_precision():
    assert (exponent("RUB"), exponent("USD"), exponent("EUR"), exponent("XTR")) == (2, 2, 2, 0)
    assert (exponent("BTC"), exponent("TON"), exponent("TRX"), exponent("LTC")) == (8, 9, 6, 8)
    # Crypto Pay's 18 places for USDT/USDC/ETH/BNB are capped so an amount fits a bigint.
    assert (exponent("USDT"), exponent("ETH")) == (CRYPTO_PRECISION_CAP, CRYPTO_PRECISION_CAP)
    for asset, decimals in CRYPTO_PAY_DECIMALS.items():
        assert EXPONENTS[asset] == min(decimals, CRYPTO_PRECISION_CAP)
        assert 10 ** EXPONENTS[asset] * 1_000_000_000 < 2**63  # a billion units still fit PostgreSQL's bigint


@pytest.mark.parametrize(
    "text, currency, minor",
    [
        ("199.00", "RUB", 19900),
        ("199", "RUB", 19900),
        ("0.01", "RUB", 1),
        ("199.1", "USD", 19910),
        ("1.10", "EUR", 110),
        ("250", "XTR", 250),
        ("250.000", "XTR", 250),
        ("0.00000001", "BTC", 1),
        ("1.5", "USDT", 1_500_000_000),
        ("1.500000000000000000", "USDT", 1_500_000_000),  # Crypto Pay's 18 places, trailing zeros
        ("0.000001", "TRX", 1),
        ("92233720368.547758070", "TON", 92_233_720_368_547_758_070),  # past a float's 15-17 digits
        (Decimal("199.10"), "RUB", 19910),  # what the YooKassa SDK's Amount holds
    ],
)
def test_provider_text_converts_to_minor_units_exactly(text, currency, minor):
    assert to_minor(text, currency) == minor


@pytest.mark.parametrize(
    "text, currency",
    [
        ("199.001", "RUB"),  # a fraction of a kopeck
        ("1.5", "XTR"),  # half a star
        ("0.0000000001", "USDT"),  # beyond the capped precision: refused, not cut
        ("0.000000001", "BTC"),
        (1.5, "RUB"),  # a float has lost the exact value already
        (True, "RUB"),
        ("-1.00", "RUB"),
        ("1e3", "RUB"),
        (".5", "RUB"),
        ("1.", "RUB"),
        ("NaN", "RUB"),
        ("Infinity", "RUB"),
        (" ", "RUB"),
        ("1,00", "RUB"),
        ("100", "DOGECOIN"),  # unknown currency
    ],
)
def test_text_that_is_not_an_exact_amount_is_refused(text, currency):
    with pytest.raises(AmountError):
        to_minor(text, currency)


@pytest.mark.parametrize(
    "minor, currency, text",
    [(19900, "RUB", "199.00"), (1, "RUB", "0.01"), (0, "USD", "0.00"), (250, "XTR", "250"),
     (1, "BTC", "0.00000001"), (1_500_000_000, "USDT", "1.500000000"), (123456789012345678901, "RUB",
     "1234567890123456789.01")],
)  # fmt: skip
def test_minor_units_format_as_the_currencys_decimal_text(minor, currency, text):
    assert to_decimal_text(minor, currency) == text


@pytest.mark.parametrize("minor", [-1, 1.0, True, "100", None])
def test_only_non_negative_integers_format(minor):
    with pytest.raises(AmountError):
        to_decimal_text(minor, "RUB")


# Up to 30 digits: the most decimal text a provider's amount may have (_DECIMAL_TEXT).
@given(minor=st.integers(min_value=0, max_value=10**30 - 1), currency=st.sampled_from(sorted(EXPONENTS)))
def test_every_amount_survives_the_round_trip_through_text(minor, currency):
    assert to_minor(to_decimal_text(minor, currency), currency) == minor
