"""SPEC 14.4: every text in both languages; callback data the bot did not make is never taken."""

import pytest

from bot import keyboards, texts
from bot.lease import BotLease
from config.settings import load_settings


def test_both_languages_have_every_text_and_the_same_fields():
    import string

    def fields(template):
        return {name for _, name, _, _ in string.Formatter().parse(template) if name}

    english, russian = texts.CATALOG["en"], texts.CATALOG["ru"]
    assert set(english) == set(russian)
    for key in english:
        assert fields(english[key]) == fields(russian[key]), key


@pytest.mark.parametrize(
    "code, language", [("ru", "ru"), ("ru-RU", "ru"), ("en", "en"), ("en-GB", "en"), ("de", "en"), (None, "en")]
)
def test_the_language_comes_from_telegrams_language_code(code, language):
    assert texts.language_of(code) == language


def test_every_button_the_bot_makes_parses_back_to_its_action():
    for language in texts.LANGUAGES:
        made = (
            keyboards.main_menu(language),
            keyboards.language_menu(language),
            keyboards.back(language),
            keyboards.plans(language, [(7, "Monthly")]),
            keyboards.payment_methods(language, 7, [(method, "XTR", method) for method in keyboards.PAYMENT_METHODS]),
            keyboards.subscriptions(
                language,
                [(1, "0b1f9a6e-3c2d-4e5f-8a9b-0c1d2e3f4a5b")],
                [(1, "0b1f9a6e-3c2d-4e5f-8a9b-0c1d2e3f4a5b", True), (2, "1b1f9a6e-3c2d-4e5f-8a9b-0c1d2e3f4a5b", False)],
            ),
            keyboards.wallet(language, [("yookassa", "RUB", 30000, "x"), ("cryptobot", "USD", 500, "y")]),
        )
        for markup in made:
            for row in markup.keyboard:
                for button in row:
                    assert keyboards.parse(button.callback_data) is not None


@pytest.mark.parametrize(
    "raw",
    ["", "menu:x", "lang:fr", "subs:", "unknown", "lang:ru:1", "é" * 40, None, 5, "buy:1", "plan:01", "plan:-1",
     "pay:1:stars", "pay:1:stars:XTR:1", "pay:1:card:RUB", "qr:1", "qr:../x", "plan:" + "9" * 19,
     "topup:yookassa:RUB", "topup:yookassa:rub:100", "topup:stars:XTR:100", "renew:1:on", "wallet:1",
     "renew:0b1f9a6e-3c2d-4e5f-8a9b-0c1d2e3f4a5b:maybe"],
)  # fmt: skip
def test_callback_data_the_bot_did_not_make_is_refused(raw):
    assert keyboards.parse(raw) is None


def test_the_lease_is_30_seconds_renewed_every_5_in_production():
    settings = load_settings({})
    assert settings.bot_lease_ttl_seconds == 30
    assert BotLease(settings.bot_lease_ttl_seconds).renew_interval_s == 5


@pytest.mark.parametrize(
    "language, days, said",
    [("en", 1, "1 day"), ("en", 21, "21 days"), ("en", 30, "30 days"), ("ru", 1, "1 день"), ("ru", 3, "3 дня"),
     ("ru", 5, "5 дней"), ("ru", 11, "11 дней"), ("ru", 21, "21 день"), ("ru", 22, "22 дня"), ("ru", 30, "30 дней")],
)  # fmt: skip
def test_a_plans_length_reads_in_the_form_its_number_asks_for(language, days, said):
    assert texts.duration(language, days) == said


def test_traffic_is_shown_in_the_customers_units():
    from bot.handlers.subscriptions import traffic_text

    shown = (traffic_text(0, "ru"), traffic_text(3 << 30, "ru"), traffic_text(3 << 30, "en"))
    assert shown == ("0 Б", "3.0 ГиБ", "3.0 GiB")
