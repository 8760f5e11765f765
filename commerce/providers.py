"""Which payment providers this shop offers, built from the settings in one place (SPEC 10, 13.4).

A provider is offered when its credentials are set: YooKassa with
APP_YOOKASSA_SHOP_ID and APP_YOOKASSA_SECRET_KEY (API at
APP_YOOKASSA_API_URL), CryptoBot with APP_CRYPTOBOT_TOKEN (API at
APP_CRYPTOBOT_API_URL). The dev stack and the tests point those URLs at the
fakes (fakes/yookassa.py, fakes/cryptobot.py). Telegram Stars has no adapter
here: the bot sends the invoice and settles the payment (commerce/stars.py),
so it is always offered. `wallet` pays from the customer's balance. A Stars
refund is one Bot API call (integrations/payments/stars.py), made by the
worker with APP_TELEGRAM_BOT_TOKEN at APP_TELEGRAM_API_URL: `refund_adapter`.

The web process builds its providers once in create_app and hands them to
its routes; a process without a web app (the worker's payment_reconcile)
takes the process-wide set, built from the settings on first use unless a
test or the bootstrap set one with `use()`.
"""

from integrations.payments.amounts import CRYPTO_ASSETS, EXPONENTS, FIAT_CURRENCIES
from integrations.payments.cryptobot import CryptoBotProvider
from integrations.payments.stars import StarsRefunds
from integrations.payments.yookassa import YooKassaProvider

YOOKASSA = "yookassa"
CRYPTOBOT = "cryptobot"
STARS = "stars"
WALLET = "wallet"
# Providers paid at an outside API, through an adapter and a payment intent.
HOSTED = (YOOKASSA, CRYPTOBOT)
# Every way a checkout can be paid.
PAYMENT_METHODS = (YOOKASSA, CRYPTOBOT, STARS, WALLET)

PROVIDER_NOT_CONFIGURED = "provider_not_configured"
PROVIDER_CURRENCY_UNSUPPORTED = "provider_currency_unsupported"

_process_providers = None
_process_stars = None


class ProviderNotConfigured(LookupError):
    code = PROVIDER_NOT_CONFIGURED


def from_settings(settings):
    """{name: adapter} for every hosted provider whose credentials are set."""
    built = {}
    if settings.yookassa_shop_id and settings.yookassa_secret_key:
        built[YOOKASSA] = YooKassaProvider(
            settings.yookassa_shop_id, settings.yookassa_secret_key, api_url=settings.yookassa_api_url
        )
    if settings.cryptobot_token:
        built[CRYPTOBOT] = CryptoBotProvider(settings.cryptobot_token, api_url=settings.cryptobot_api_url)
    return built


def use(providers):
    """Set this process's providers (tests, the bootstrap); None: build them from the settings on next use."""
    global _process_providers
    _process_providers = None if providers is None else dict(providers)


def process_providers():
    global _process_providers
    if _process_providers is None:
        from config.settings import load_settings

        _process_providers = from_settings(load_settings())
    return _process_providers


def use_stars(refunds):
    """Set this process's Stars refunder (tests); None: build it from the settings on next use."""
    global _process_stars
    _process_stars = refunds


def refund_adapter(name):
    """What refunds a payment made at `name` in this process; ProviderNotConfigured when nothing can."""
    global _process_stars
    if name != STARS:
        return adapter(process_providers(), name)
    if _process_stars is None:
        from config.settings import load_settings

        settings = load_settings()
        if not settings.telegram_bot_token:
            raise ProviderNotConfigured("stars refunds need APP_TELEGRAM_BOT_TOKEN")
        _process_stars = StarsRefunds(settings.telegram_bot_token, settings.telegram_api_url)
    return _process_stars


def adapter(providers, name):
    """The adapter for a hosted provider; ProviderNotConfigured when this shop has none."""
    found = providers.get(name)
    if found is None:
        raise ProviderNotConfigured(f"{name} is not configured here")
    return found


def offered(providers, name):
    return name in (STARS, WALLET) or name in providers


def accepts(name, currency):
    """Whether this way of paying can take an order in `currency` (what its adapter can send)."""
    if name == STARS:
        return currency == "XTR"
    if name == YOOKASSA:
        return EXPONENTS.get(currency) == 2  # the SDK's Amount keeps two places
    if name == CRYPTOBOT:
        return currency in FIAT_CURRENCIES or currency in CRYPTO_ASSETS
    return name == WALLET
