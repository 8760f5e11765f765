"""SPEC 10: settings come from the environment; a bad value stops the process
with a message naming the variable, and never echoes a secret."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import CRYPTOBOT_API_URL, YOOKASSA_API_URL, ConfigError, load_settings
from fakes.remnawave import DEV_TOKEN as DEV_PANEL_TOKEN

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_the_spec_defaults_and_sqlite_in_development():
    settings = load_settings({})
    assert settings.database.dialect == "sqlite"
    assert (
        settings.retention_interval_hours,
        settings.retention_outbox_days,
        settings.retention_telemetry_days,
        settings.retention_drift_days,
        settings.backup_interval_hours,
        settings.maintenance_probe_seconds,
        settings.telegram_delivery_rate,
    ) == (1, 7, 30, 90, 24, 30, 25)


def test_session_cookies_are_secure_and_no_proxy_is_trusted_unless_configured():
    settings = load_settings({})
    assert settings.cookie_secure is True and settings.trusted_proxy == ""
    configured = load_settings(
        {"APP_COOKIE_SECURE": "False", "APP_TRUSTED_PROXY": "10.0.0.2", "APP_TRUSTED_PROXY_COUNT": "2"}
    )
    assert (configured.cookie_secure, configured.trusted_proxy) == (False, "10.0.0.2")
    assert configured.trusted_proxy_count == 2


def test_yookassa_notifications_are_taken_from_its_published_addresses_unless_configured_otherwise():
    from ipaddress import ip_network

    published = load_settings({}).yookassa_webhook_addresses
    assert [str(network) for network in published] == [
        "185.71.76.0/27", "185.71.77.0/27", "77.75.153.0/25", "77.75.156.11/32", "77.75.156.35/32",
        "77.75.154.128/25", "2a02:5180::/32",
    ]  # fmt: skip
    assert load_settings({"APP_YOOKASSA_WEBHOOK_ADDRESSES": "*"}).yookassa_webhook_addresses is None
    mine = load_settings({"APP_YOOKASSA_WEBHOOK_ADDRESSES": " 10.1.2.0/24, ::1 "}).yookassa_webhook_addresses
    assert mine == (ip_network("10.1.2.0/24"), ip_network("::1/128"))
    for bad in ("10.1.2.3/24", "yookassa.ru", ",", "10.0.0.0/33"):
        with pytest.raises(ConfigError, match="APP_YOOKASSA_WEBHOOK_ADDRESSES"):
            load_settings({"APP_YOOKASSA_WEBHOOK_ADDRESSES": bad})


def test_the_webhook_rate_limit_defaults_to_a_providers_burst_and_must_be_positive():
    assert load_settings({}).webhook_rate_limit == 600
    assert load_settings({"APP_WEBHOOK_RATE_LIMIT": "5000"}).webhook_rate_limit == 5000
    for bad in ("0", "-1", "many"):
        with pytest.raises(ConfigError, match="APP_WEBHOOK_RATE_LIMIT"):
            load_settings({"APP_WEBHOOK_RATE_LIMIT": bad})


def test_an_operator_session_is_kept_30_minutes_unused_unless_configured_up_to_12_hours():
    assert load_settings({}).operator_idle_minutes == 30
    assert load_settings({"APP_OPERATOR_IDLE_MINUTES": "720"}).operator_idle_minutes == 720


def test_postgres_url_is_accepted_in_both_spellings():
    for url in ("postgres://u:p@db:5432/omniflow", "postgresql://u:p@db:5432/omniflow"):
        target = load_settings({"DATABASE_URL": url}).database
        assert target.is_postgres and target.dsn.startswith("postgresql://")


def test_a_direct_database_url_is_optional_and_its_password_reaches_the_redactor():
    pooled = "postgresql://app:pooled-secret@pgbouncer:6432/omniflow"
    assert load_settings({"DATABASE_URL": pooled}).direct_database is None
    settings = load_settings(
        {"DATABASE_URL": pooled, "DATABASE_DIRECT_URL": "postgres://app:direct-secret@db/omniflow"}
    )
    assert settings.direct_database.is_postgres
    assert settings.direct_database.dsn == "postgresql://app:direct-secret@db/omniflow"
    assert {"pooled-secret", "direct-secret"} <= set(settings.secrets())


@pytest.mark.parametrize(
    "environ",
    [
        {"DATABASE_DIRECT_URL": "postgresql://db/omniflow"},  # DATABASE_URL unset: the SQLite file
        {"DATABASE_URL": "postgresql://pgbouncer/omniflow", "DATABASE_DIRECT_URL": "sqlite:///direct.db"},
        {"DATABASE_URL": "postgresql://pgbouncer/omniflow", "DATABASE_DIRECT_URL": "postgresql://db"},
    ],
)
def test_a_direct_database_url_is_postgresql_beside_a_postgresql_database_url(environ):
    with pytest.raises(ConfigError) as error:
        load_settings(environ)
    assert error.value.variable == "DATABASE_DIRECT_URL"


@pytest.mark.parametrize(
    "variable, value",
    [
        ("APP_RETENTION_INTERVAL_HOURS", "abc"),
        ("APP_RETENTION_OUTBOX_DAYS", "0"),
        ("APP_MAINTENANCE_PROBE_SECONDS", "-5"),
        ("APP_TELEGRAM_DELIVERY_RATE", "1.5"),
        ("PORT", "70000"),
        ("DATABASE_URL", "mysql://localhost/x"),
        ("DATABASE_URL", "postgresql://localhost"),
        ("APP_REMNAWAVE_URL", "ftp://panel"),
        ("LOG_LEVEL", "LOUD"),
        ("APP_COOKIE_SECURE", "maybe"),
        ("APP_TRUSTED_PROXY", "proxy.internal"),
        ("APP_TRUSTED_PROXY_COUNT", "0"),
        ("APP_OPERATOR_IDLE_MINUTES", "0"),
        ("APP_OPERATOR_IDLE_MINUTES", "721"),
    ],
)
def test_bad_value_names_the_variable(variable, value):
    with pytest.raises(ConfigError) as error:
        load_settings({variable: value})
    assert error.value.variable == variable
    assert str(error.value).startswith(variable)


def test_a_bad_secret_is_not_echoed():
    with pytest.raises(ConfigError) as error:
        load_settings({"APP_OPERATOR_TOKEN": "tooshort"})
    assert "tooshort" not in str(error.value)


@pytest.mark.parametrize(
    "token",
    ["tiny", "a-long-token-that-is-no-jwt-0123", "one.two.three", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0", "a b.c.d"],
)
def test_a_panel_token_that_is_no_jwt_is_refused_with_the_rule_and_never_echoed(token):
    with pytest.raises(ConfigError) as error:
        load_settings({"APP_REMNAWAVE_TOKEN": token})
    assert error.value.variable == "APP_REMNAWAVE_TOKEN"
    assert "JWT" in str(error.value) and "three base64url parts" in str(error.value)
    assert token not in str(error.value)


def test_a_panel_token_shaped_like_the_panels_jwts_is_accepted():
    assert load_settings({"APP_REMNAWAVE_TOKEN": DEV_PANEL_TOKEN}).remnawave_token == DEV_PANEL_TOKEN


def test_dotenv_file_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    dotenv = tmp_path / ".env"
    dotenv.write_text("APP_RETENTION_DRIFT_DAYS=45\nAPP_BACKUP_INTERVAL_HOURS=12\n")
    monkeypatch.setenv("APP_BACKUP_INTERVAL_HOURS", "6")
    monkeypatch.delenv("APP_RETENTION_DRIFT_DAYS", raising=False)
    settings = load_settings(dotenv_path=dotenv)
    assert settings.retention_drift_days == 45
    assert settings.backup_interval_hours == 6


def test_process_with_a_bad_value_exits_with_a_message_naming_it(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'x.sqlite3'}", APP_RETENTION_OUTBOX_DAYS="seven")
    result = subprocess.run(
        [sys.executable, "omniflow.py", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "APP_RETENTION_OUTBOX_DAYS" in result.stderr
    assert "Traceback" not in result.stderr


def test_payment_providers_default_to_their_real_apis_and_no_credentials():
    settings = load_settings({})
    assert (settings.yookassa_api_url, settings.cryptobot_api_url) == (YOOKASSA_API_URL, CRYPTOBOT_API_URL)
    assert (settings.yookassa_shop_id, settings.yookassa_secret_key, settings.cryptobot_token) == ("", "", "")
    assert settings.public_url == ""


def test_the_settings_defaults_are_the_adapters_defaults():
    from integrations.payments.cryptobot import MAINNET_API_URL
    from integrations.payments.yookassa import DEFAULT_API_URL

    assert (YOOKASSA_API_URL, CRYPTOBOT_API_URL) == (DEFAULT_API_URL, MAINNET_API_URL)


def test_payment_provider_settings_are_read_and_their_secrets_reach_the_redactor():
    settings = load_settings(
        {
            "APP_PUBLIC_URL": "https://shop.example.test/",
            "APP_YOOKASSA_SHOP_ID": "506751",
            "APP_YOOKASSA_SECRET_KEY": "test_yookassa-secret-value",
            "APP_YOOKASSA_API_URL": "http://127.0.0.1:3020/v3",
            "APP_CRYPTOBOT_TOKEN": "9009:AAcryptobot-token-value",
            "APP_CRYPTOBOT_API_URL": "https://testnet-pay.crypt.bot",
        }
    )
    assert settings.public_url == "https://shop.example.test"
    assert (settings.yookassa_shop_id, settings.yookassa_api_url) == ("506751", "http://127.0.0.1:3020/v3")
    assert settings.cryptobot_api_url == "https://testnet-pay.crypt.bot"
    assert {"test_yookassa-secret-value", "9009:AAcryptobot-token-value"} <= set(settings.secrets())
    assert "test_yookassa-secret-value" not in repr(settings) and "AAcryptobot" not in repr(settings)


@pytest.mark.parametrize(
    "environ, variable",
    [
        ({"APP_PUBLIC_URL": "shop.example.test"}, "APP_PUBLIC_URL"),
        ({"APP_PUBLIC_URL": "https://shop.example.test/?x=1"}, "APP_PUBLIC_URL"),
        ({"APP_YOOKASSA_API_URL": "ftp://api"}, "APP_YOOKASSA_API_URL"),
        ({"APP_CRYPTOBOT_API_URL": "https://user:pw@pay.crypt.bot"}, "APP_CRYPTOBOT_API_URL"),
        ({"APP_YOOKASSA_SHOP_ID": "shop-one", "APP_YOOKASSA_SECRET_KEY": "s"}, "APP_YOOKASSA_SHOP_ID"),
        ({"APP_YOOKASSA_SHOP_ID": "506751"}, "APP_YOOKASSA_SECRET_KEY"),
        ({"APP_YOOKASSA_SECRET_KEY": "test_secret-without-a-shop"}, "APP_YOOKASSA_SHOP_ID"),
        ({"APP_YOOKASSA_SHOP_ID": "506751", "APP_YOOKASSA_SECRET_KEY": "test_secret-without-a-shop"}, "APP_PUBLIC_URL"),
        ({"APP_CRYPTOBOT_TOKEN": "9009:AAtoken-without-a-public-url"}, "APP_PUBLIC_URL"),
    ],
)
def test_a_bad_payment_provider_setting_names_its_variable_and_never_echoes_a_secret(environ, variable):
    with pytest.raises(ConfigError) as error:
        load_settings(environ)
    assert error.value.variable == variable
    assert "test_secret-without-a-shop" not in str(error.value)


def test_telegram_settings_default_to_the_real_api_and_everything_off():
    settings = load_settings({})
    assert settings.telegram_api_url == "https://api.telegram.org"
    assert (settings.telegram_operator_chat_id, settings.telegram_required_channel) == (0, "")


def test_telegram_settings_are_read():
    settings = load_settings(
        {
            "APP_TELEGRAM_BOT_TOKEN": "123456:AAbot-token-value_1",
            "APP_TELEGRAM_API_URL": "http://127.0.0.1:8081/",
            "APP_TELEGRAM_OPERATOR_CHAT_ID": "-1001234567890",
            "APP_TELEGRAM_REQUIRED_CHANNEL": "@omniflow_news",
            "OMNIFLOW_TEST_BOT_LEASE_TTL_SECONDS": "6",
        }
    )
    assert settings.telegram_api_url == "http://127.0.0.1:8081"
    assert settings.telegram_operator_chat_id == -1001234567890
    assert settings.telegram_required_channel == "@omniflow_news"
    assert settings.bot_lease_ttl_seconds == 6
    assert "123456:AAbot-token-value_1" in settings.secrets()


@pytest.mark.parametrize(
    "variable, value",
    [
        ("APP_TELEGRAM_BOT_TOKEN", "not a token at all"),
        ("APP_TELEGRAM_API_URL", "api.telegram.org"),
        ("APP_TELEGRAM_OPERATOR_CHAT_ID", "operators"),
        ("APP_TELEGRAM_OPERATOR_CHAT_ID", "0"),
        ("APP_TELEGRAM_REQUIRED_CHANNEL", "t.me/news"),
        ("OMNIFLOW_TEST_BOT_LEASE_TTL_SECONDS", "1"),
    ],
)
def test_a_bad_telegram_setting_names_its_variable_and_never_echoes_the_token(variable, value):
    with pytest.raises(ConfigError) as error:
        load_settings({variable: value})
    assert error.value.variable == variable
    assert "not a token at all" not in str(error.value)


def test_the_bot_refuses_to_start_without_a_token(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("APP_TELEGRAM_")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    result = subprocess.run([sys.executable, "omniflow.py", "bot"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 2
    assert "APP_TELEGRAM_BOT_TOKEN" in result.stderr and "Traceback" not in result.stderr


def test_worker_metrics_listen_on_loopback_unless_told_and_beyond_it_only_behind_the_metrics_token():
    assert load_settings({}).worker_metrics_address == "127.0.0.1"
    with pytest.raises(ConfigError) as error:
        load_settings({"APP_WORKER_METRICS_ADDRESS": "0.0.0.0"})
    assert error.value.variable == "APP_WORKER_METRICS_ADDRESS"
    token = "metrics-token-0123456789"
    settings = load_settings({"APP_WORKER_METRICS_ADDRESS": "0.0.0.0", "APP_METRICS_TOKEN": token})
    assert (settings.worker_metrics_address, settings.metrics_token) == ("0.0.0.0", token)
    assert token in settings.secrets()


@pytest.mark.parametrize(
    "environ",
    [
        {"APP_METRICS_TOKEN": "short-token"},
        {"APP_METRICS_TOKEN": "same-token-0123456789", "APP_OPERATOR_TOKEN": "same-token-0123456789"},
    ],
)
def test_a_metrics_token_is_long_and_not_the_operator_token(environ):
    with pytest.raises(ConfigError) as error:
        load_settings(environ)
    assert error.value.variable == "APP_METRICS_TOKEN"
    assert environ["APP_METRICS_TOKEN"] not in str(error.value)
