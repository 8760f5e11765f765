"""Money between integer minor units and providers' decimal strings, exactly: digit arithmetic, never float.

Each currency has an exponent (the number of decimal places its minor unit
stands for). Converting a provider's text to minor units refuses any value
that is not an exact multiple of the minor unit: an amount is never rounded,
because a rounded amount would settle an order for money that was not paid.

- ISO currencies (RUB, USD, EUR and the other fiats Crypto Pay prices in): 2.
- XTR, Telegram Stars: 0 (a star is indivisible).
- Crypto assets: Crypto Pay's own precision (its getCurrencies `decimals`),
  capped at 9 places. Crypto Pay reports 18 for USDT, USDC, ETH and BNB; at 18
  places a PostgreSQL bigint (the database's integer) holds at most 9.22 units
  of the asset, less than a price list needs, while 9 places hold up to 9.2
  billion. Every crypto amount Omniflow sends is a price it set itself, so
  nothing it settles carries more than 9 places; an amount that does is
  refused rather than cut.
"""

import re
from decimal import Decimal

# The fiat currencies Crypto Pay prices invoices in (RUB, USD and EUR among them): ISO exponent 2 each.
FIAT_CURRENCIES = (
    "RUB", "USD", "EUR", "BYN", "UAH", "GBP", "CNY", "KZT", "UZS", "GEL", "TRY", "AMD", "THB", "INR",
    "BRL", "IDR", "AZN", "AED", "PLN", "ILS", "KGS", "TJS",
)  # fmt: skip
CRYPTO_PRECISION_CAP = 9
# Crypto Pay's getCurrencies `decimals` per asset, before the cap.
CRYPTO_PAY_DECIMALS = {
    "USDT": 18,
    "USDC": 18,
    "TON": 9,
    "BTC": 8,
    "ETH": 18,
    "LTC": 8,
    "BNB": 18,
    "TRX": 6,
    "JET": 9,  # testnet only
}
EXPONENTS = {
    **{code: 2 for code in FIAT_CURRENCIES},
    "XTR": 0,
    **{asset: min(decimals, CRYPTO_PRECISION_CAP) for asset, decimals in CRYPTO_PAY_DECIMALS.items()},
}
CRYPTO_ASSETS = tuple(CRYPTO_PAY_DECIMALS)

_DECIMAL_TEXT = re.compile(r"^[0-9]{1,30}(?:\.[0-9]{1,30})?$")


class AmountError(ValueError):
    """An amount that cannot be represented exactly in its currency's minor units, or an unknown currency."""


def exponent(currency):
    try:
        return EXPONENTS[currency]
    except (KeyError, TypeError):
        raise AmountError("unknown currency") from None


def to_minor(text, currency):
    """A provider's decimal text ("199.00", "0.5", "12") → integer minor units; AmountError unless exact.

    Integer arithmetic on the digits, so no context precision or rounding mode
    can change a value on the way.
    """
    places = exponent(currency)
    if isinstance(text, Decimal):
        text = format(text, "f")  # plain digits, never an exponent
    elif isinstance(text, bool) or not isinstance(text, (str, int)):
        # A float has already lost the exact value: refuse it rather than guess.
        raise AmountError("an amount must be decimal text")
    raw = str(text).strip()
    if not _DECIMAL_TEXT.match(raw):
        raise AmountError("an amount must be plain non-negative decimal text")
    whole, _, fraction = raw.partition(".")
    fraction = fraction.rstrip("0")
    if len(fraction) > places:
        raise AmountError("the amount has more decimal places than its currency's minor unit")
    return int(whole) * 10**places + int(fraction.ljust(places, "0") or "0")


def to_decimal_text(amount_minor, currency):
    """Integer minor units → the decimal text providers take, with the currency's places: 19900 RUB → "199.00"."""
    places = exponent(currency)
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int):
        raise AmountError("an amount in minor units must be an integer")
    if amount_minor < 0:
        raise AmountError("an amount must not be negative")
    if places == 0:
        return str(amount_minor)
    whole, fraction = divmod(amount_minor, 10**places)
    return f"{whole}.{fraction:0{places}d}"
