"""Settings from the environment, validated once at process start (SPEC 10).

A `.env` file next to omniflow.py is read in development; real environment
variables win over it. A bad value raises ConfigError naming the variable,
and the entry point turns that into a one-line message and a non-zero exit.
Secret values are never echoed back in those messages.
"""

import base64
import ipaddress
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SQLITE_PATH = PROJECT_ROOT / "var" / "omniflow.sqlite3"

SECRET_VARIABLES = (
    "APP_OPERATOR_TOKEN",
    "APP_METRICS_TOKEN",
    "APP_DATA_ENCRYPTION_KEY",
    "APP_REMNAWAVE_TOKEN",
    "APP_TELEGRAM_BOT_TOKEN",
    "APP_YOOKASSA_SECRET_KEY",
    "APP_CRYPTOBOT_TOKEN",
)

# The providers' real APIs (the adapters' own defaults, integrations/payments/).
YOOKASSA_API_URL = "https://api.yookassa.ru/v3"
CRYPTOBOT_API_URL = "https://pay.crypt.bot"  # testnet: https://testnet-pay.crypt.bot
# Where YooKassa sends its notifications from, as its documentation on notifications publishes it
# (yookassa.ru/developers/using-api/webhooks, "IP addresses"): nothing else may deliver one.
YOOKASSA_NOTIFICATION_ADDRESSES = (
    "185.71.76.0/27",
    "185.71.77.0/27",
    "77.75.153.0/25",
    "77.75.156.11",
    "77.75.156.35",
    "77.75.154.128/25",
    "2a02:5180::/32",
)
# Webhook requests a client address may make per minute (per web process). A provider's burst stays well
# under it: YooKassa notifies from dozens of addresses, one notification per payment event, and delivers
# again for 24 hours after any answer but 200; any payment whose delivery is still refused is settled by
# payment_reconcile's poll. A flood costs no more than this.
WEBHOOK_RATE_LIMIT = 600
TELEGRAM_API_URL = "https://api.telegram.org"  # a local Bot API server or the fake stands in (SPEC 14.1)
BOT_LEASE_TTL_S = 30  # SPEC 14.2; tests shorten it with OMNIFLOW_TEST_BOT_LEASE_TTL_SECONDS
MIN_BOT_LEASE_TTL_S = 3
MAX_IDLE_MINUTES = 12 * 60

# The largest wallet top-up per currency, in minor units: 100 000.00 RUB, 1 000.00 USD, 10 000 Stars
# (Telegram's own limit on one Stars invoice). A currency not named takes no top-ups.
TOPUP_MAX_MINOR = {"RUB": 10_000_000, "USD": 100_000, "XTR": 10_000}
AMOUNT_MAX_MINOR = 2**63 - 1  # what the database's amounts hold

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class ConfigError(Exception):
    """A variable is missing or malformed; the message names it."""

    def __init__(self, variable, problem):
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


@dataclass(frozen=True)
class DatabaseTarget:
    """Where the data lives: a PostgreSQL DSN or a SQLite file path."""

    dialect: str  # "postgres" or "sqlite"
    dsn: str = ""
    path: str = ""

    @property
    def is_postgres(self):
        return self.dialect == "postgres"


@dataclass(frozen=True)
class Settings:
    database: DatabaseTarget
    # DATABASE_DIRECT_URL: the same PostgreSQL without the pooler, for what needs a session (LISTEN).
    direct_database: DatabaseTarget | None = None
    port: int = 8000
    log_level: str = "INFO"
    operator_token: str = field(default="", repr=False)
    data_encryption_key: str = field(default="", repr=False)
    remnawave_url: str = ""
    remnawave_token: str = field(default="", repr=False)
    telegram_bot_token: str = field(default="", repr=False)
    retention_interval_hours: int = 1
    retention_outbox_days: int = 7
    retention_telemetry_days: int = 30
    retention_drift_days: int = 90
    backup_interval_hours: int = 24
    backup_dir: str = ""
    maintenance_probe_seconds: int = 30
    telegram_delivery_rate: int = 25
    support_attachment_dir: str = ""
    support_attachment_max_bytes: int = 5 << 20  # a support photo over this is refused (bot/handlers/support.py)
    worker_metrics_port: int = 0  # 0: the worker serves no metrics endpoint
    worker_metrics_address: str = "127.0.0.1"  # beyond this host only with a metrics token
    metrics_token: str = field(default="", repr=False)  # read-only: opens the web's and workers' metrics only
    public_url: str = ""  # where providers and payers reach the web process: webhooks, return URLs
    yookassa_shop_id: str = ""
    yookassa_secret_key: str = field(default="", repr=False)
    yookassa_api_url: str = YOOKASSA_API_URL
    cryptobot_token: str = field(default="", repr=False)
    cryptobot_api_url: str = CRYPTOBOT_API_URL
    cookie_secure: bool = True  # False only for development over plain http
    operator_idle_minutes: int = 30  # an operator's session ends this long after its last use
    trusted_proxy: str = ""  # the reverse proxy whose X-Forwarded-For names the client ("*": any peer)
    trusted_proxy_count: int = 1  # how many proxies in a row append to X-Forwarded-For
    # None: any address may deliver (the dev stack, whose fakes run on this machine)
    yookassa_webhook_addresses: tuple = tuple(ipaddress.ip_network(net) for net in YOOKASSA_NOTIFICATION_ADDRESSES)
    webhook_rate_limit: int = WEBHOOK_RATE_LIMIT  # requests per minute per client address, on the webhook routes
    outbox_retry_base_ms: int = 10_000  # the outbox's first retry delay; tests shorten it
    outbox_allow_private_destinations: bool = False  # on-premises receivers on loopback or private addresses
    telegram_api_url: str = TELEGRAM_API_URL
    telegram_operator_chat_id: int = 0  # 0: the operator notifier is off
    telegram_required_channel: str = ""  # "": channel membership is not checked
    bot_lease_ttl_seconds: int = BOT_LEASE_TTL_S
    topup_max_minor: dict = field(default_factory=lambda: dict(TOPUP_MAX_MINOR))
    telemetry_url: str = ""  # "": no heartbeat is sent (SPEC 15.9: off by default)
    telemetry_collector: bool = False  # this web process accepts and stores other installations' heartbeats

    def secrets(self):
        """Every secret value currently configured, for the redactor."""
        return [
            value
            for value in (
                self.operator_token,
                self.metrics_token,
                self.data_encryption_key,
                *(key.strip() for key in self.data_encryption_key.split(",")),
                self.remnawave_token,
                self.telegram_bot_token,
                self.yookassa_secret_key,
                self.cryptobot_token,
                self.database.dsn and urlsplit(self.database.dsn).password,
                self.direct_database and urlsplit(self.direct_database.dsn).password,
            )
            if value
        ]


def parse_database_url(value, variable="DATABASE_URL"):
    """DATABASE_URL → DatabaseTarget. Unset means the development SQLite file."""
    if not value:
        return DatabaseTarget("sqlite", path=str(DEFAULT_SQLITE_PATH))
    parts = urlsplit(value)
    if parts.scheme in ("postgres", "postgresql"):
        if not parts.path.strip("/"):
            raise ConfigError(variable, "a PostgreSQL URL must name a database")
        return DatabaseTarget("postgres", dsn="postgresql" + value[len(parts.scheme) :])
    if parts.scheme == "sqlite":
        # sqlite:///relative/or/absolute/path — three slashes, then the path.
        path = value[len("sqlite:///") :] if value.startswith("sqlite:///") else ""
        if not path:
            raise ConfigError(variable, "a SQLite URL looks like sqlite:///path/to/file.db")
        return DatabaseTarget("sqlite", path=path)
    raise ConfigError(variable, "must start with postgresql://, postgres:// or sqlite:///")


def _direct_database(env, database):
    """DATABASE_DIRECT_URL: where a worker LISTENs when DATABASE_URL is a transaction-pooling PgBouncer
    (a pooled connection is not a session, so its notifications never arrive). Optional."""
    raw = (env.get("DATABASE_DIRECT_URL") or "").strip()
    if not raw:
        return None
    if urlsplit(raw).scheme not in ("postgres", "postgresql"):
        raise ConfigError("DATABASE_DIRECT_URL", "must be a postgresql:// URL")
    if not database.is_postgres:
        raise ConfigError("DATABASE_DIRECT_URL", "is set, but DATABASE_URL is not a PostgreSQL URL")
    return parse_database_url(raw, "DATABASE_DIRECT_URL")


def _positive_int(env, name, default):
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(name, f"must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(name, f"must be a positive integer, got {raw!r}")
    return value


def _port(env, name, default):
    port = _positive_int(env, name, default)
    if port > 65535:
        raise ConfigError(name, "must be at most 65535")
    return port


def _url(env, name):
    raw = (env.get(name) or "").strip()
    if raw and urlsplit(raw).scheme not in ("http", "https"):
        raise ConfigError(name, "must be an http:// or https:// URL")
    return raw


def _boolean(env, name, default):
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in TRUE_WORDS:
        return True
    if raw in FALSE_WORDS:
        return False
    raise ConfigError(name, f"must be true or false, got {raw!r}")


def _proxy_address(env, name):
    raw = (env.get(name) or "").strip()
    if raw and raw != "*":
        try:
            ipaddress.ip_address(raw)
        except ValueError:
            raise ConfigError(name, f"must be the proxy's IP address (as it connects) or *, got {raw!r}") from None
    return raw


def _networks(env, name, default):
    """Comma-separated IP addresses and CIDR networks, or * for any address (None)."""
    raw = (env.get(name) or "").strip()
    if raw == "*":
        return None
    entries = [entry.strip() for entry in raw.split(",") if entry.strip()] if raw else list(default)
    if not entries:
        raise ConfigError(name, "must list IP addresses or networks (CIDR), comma-separated, or be *")
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry))
        except ValueError:
            raise ConfigError(name, f"must list IP addresses or networks (185.71.76.0/27), got {entry!r}") from None
    return tuple(networks)


def _secret(env, name, min_length=0):
    raw = (env.get(name) or "").strip()
    if raw and len(raw) < min_length:
        # Never echo the value: it is a secret even when it is a bad one.
        raise ConfigError(name, f"must be at least {min_length} characters long")
    return raw


def _base_url(env, name, default=""):
    """An http(s) base URL without credentials, query or fragment; no trailing slash."""
    raw = _url(env, name) or default
    parts = urlsplit(raw)
    if raw and (not parts.hostname or parts.username or parts.password or parts.query or parts.fragment):
        raise ConfigError(name, "must be a base URL without credentials, query or fragment")
    return raw.rstrip("/")


def _topup_max(env, name):
    """`RUB:10000000,USD:100000` → {currency: the largest top-up in minor units}; unset: TOPUP_MAX_MINOR."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return dict(TOPUP_MAX_MINOR)
    limits = {}
    for part in raw.split(","):
        currency, _, amount = part.strip().partition(":")
        currency, amount = currency.strip(), amount.strip()
        valid = re.fullmatch(r"[A-Z]{3}", currency) and amount.isascii() and amount.isdigit()
        if not valid or not 0 < int(amount) <= AMOUNT_MAX_MINOR or currency in limits:
            raise ConfigError(
                name, f"must be CURRENCY:minor units pairs, e.g. RUB:10000000,USD:100000, got {part.strip()!r}"
            )
        limits[currency] = int(amount)
    return limits


def _telegram_token(env):
    name = "APP_TELEGRAM_BOT_TOKEN"
    raw = _secret(env, name)
    if raw and not re.fullmatch(r"\d+:[A-Za-z0-9_-]+", raw):
        raise ConfigError(name, "must look like <bot id>:<secret>, as @BotFather gives it")
    return raw


def _panel_token(env):
    """Remnawave's API tokens are JWTs the panel signs: anything else can only be refused by the panel later."""
    name = "APP_REMNAWAVE_TOKEN"
    raw = _secret(env, name)
    if raw and not _is_jwt(raw):
        raise ConfigError(
            name,
            "must be the panel's API token, a JWT: three base64url parts separated by dots "
            "(header.payload.signature), the header a JSON object",
        )
    return raw


def _is_jwt(raw):
    if not re.fullmatch(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", raw):
        return False
    header = raw.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except ValueError:
        return False
    return isinstance(decoded, dict)


def _chat_id(env, name):
    """A Telegram chat id: an integer (supergroups are negative), or 0 when unset."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(name, f"must be a Telegram chat id (an integer, e.g. -1001234567890), got {raw!r}") from None
    if value == 0:
        raise ConfigError(name, "must be a Telegram chat id, not 0")
    return value


def _channel(env, name):
    """A channel: @username or its numeric id."""
    raw = (env.get(name) or "").strip()
    if raw and not re.fullmatch(r"@[A-Za-z][A-Za-z0-9_]{3,31}|-?\d+", raw):
        raise ConfigError(name, f"must be a channel's @username or numeric id, got {raw!r}")
    return raw


def _bot_lease_ttl(env):
    name = "OMNIFLOW_TEST_BOT_LEASE_TTL_SECONDS"
    ttl = _positive_int(env, name, BOT_LEASE_TTL_S)
    if ttl < MIN_BOT_LEASE_TTL_S:
        raise ConfigError(name, f"must be at least {MIN_BOT_LEASE_TTL_S}")
    return ttl


def _idle_minutes(env):
    name = "APP_OPERATOR_IDLE_MINUTES"
    minutes = _positive_int(env, name, 30)
    if minutes > MAX_IDLE_MINUTES:
        raise ConfigError(name, f"must be at most {MAX_IDLE_MINUTES} (a session ends 12 hours after sign-in anyway)")
    return minutes


def _yookassa_shop(env):
    """APP_YOOKASSA_SHOP_ID and APP_YOOKASSA_SECRET_KEY: both or neither."""
    shop_id = (env.get("APP_YOOKASSA_SHOP_ID") or "").strip()
    secret_key = _secret(env, "APP_YOOKASSA_SECRET_KEY")
    if shop_id and not shop_id.isdigit():
        raise ConfigError("APP_YOOKASSA_SHOP_ID", "must be the shop's numeric id")
    if shop_id and not secret_key:
        raise ConfigError("APP_YOOKASSA_SECRET_KEY", "is required when APP_YOOKASSA_SHOP_ID is set")
    if secret_key and not shop_id:
        raise ConfigError("APP_YOOKASSA_SHOP_ID", "is required when APP_YOOKASSA_SECRET_KEY is set")
    return shop_id, secret_key


def _metrics_access(env, operator_token):
    """APP_METRICS_TOKEN, APP_WORKER_METRICS_ADDRESS: a token of its own, and a worker's metrics
    reachable from other hosts only behind it."""
    token = _secret(env, "APP_METRICS_TOKEN", min_length=16)
    if token and token == operator_token:
        raise ConfigError("APP_METRICS_TOKEN", "must differ from APP_OPERATOR_TOKEN (it opens nothing but metrics)")
    name = "APP_WORKER_METRICS_ADDRESS"
    raw = (env.get(name) or "").strip() or "127.0.0.1"
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        raise ConfigError(name, f"must be an IP address to listen on, got {raw!r}") from None
    if not address.is_loopback and not token:
        raise ConfigError(name, "serves beyond this host only with APP_METRICS_TOKEN set")
    return token, raw


def _encryption_keys(env, name):
    from ops.sealing import KeyFormatError, parse_keys

    raw = (env.get(name) or "").strip()
    try:
        parse_keys(raw)
    except KeyFormatError as error:
        raise ConfigError(name, str(error)) from None
    return raw


def load_settings(environ=None, dotenv_path=None):
    """Read and validate every variable; raise ConfigError on the first bad one."""
    if environ is None:
        environ = dict(os.environ)
        dotenv_file = Path(dotenv_path) if dotenv_path else PROJECT_ROOT / ".env"
        if dotenv_file.exists():
            from dotenv import dotenv_values

            file_values = {k: v for k, v in dotenv_values(dotenv_file).items() if v is not None}
            environ = {**file_values, **environ}

    log_level = (environ.get("LOG_LEVEL") or "INFO").strip().upper()
    if log_level not in LOG_LEVELS:
        raise ConfigError("LOG_LEVEL", f"must be one of {', '.join(LOG_LEVELS)}")

    port = _port(environ, "PORT", 8000)
    yookassa_shop_id, yookassa_secret_key = _yookassa_shop(environ)
    public_url = _base_url(environ, "APP_PUBLIC_URL")
    cryptobot_token = _secret(environ, "APP_CRYPTOBOT_TOKEN")
    operator_token = _secret(environ, "APP_OPERATOR_TOKEN", min_length=16)
    metrics_token, worker_metrics_address = _metrics_access(environ, operator_token)
    if (yookassa_shop_id or cryptobot_token) and not public_url:
        # Providers deliver webhooks to it and send payers back to it.
        raise ConfigError("APP_PUBLIC_URL", "is required when a payment provider is configured")

    database = parse_database_url((environ.get("DATABASE_URL") or "").strip())
    return Settings(
        database=database,
        direct_database=_direct_database(environ, database),
        port=port,
        log_level=log_level,
        operator_token=operator_token,
        metrics_token=metrics_token,
        data_encryption_key=_encryption_keys(environ, "APP_DATA_ENCRYPTION_KEY"),
        remnawave_url=_url(environ, "APP_REMNAWAVE_URL"),
        remnawave_token=_panel_token(environ),
        telegram_bot_token=_telegram_token(environ),
        retention_interval_hours=_positive_int(environ, "APP_RETENTION_INTERVAL_HOURS", 1),
        retention_outbox_days=_positive_int(environ, "APP_RETENTION_OUTBOX_DAYS", 7),
        retention_telemetry_days=_positive_int(environ, "APP_RETENTION_TELEMETRY_DAYS", 30),
        retention_drift_days=_positive_int(environ, "APP_RETENTION_DRIFT_DAYS", 90),
        backup_interval_hours=_positive_int(environ, "APP_BACKUP_INTERVAL_HOURS", 24),
        backup_dir=(environ.get("APP_BACKUP_DIR") or "").strip(),
        maintenance_probe_seconds=_positive_int(environ, "APP_MAINTENANCE_PROBE_SECONDS", 30),
        telegram_delivery_rate=_positive_int(environ, "APP_TELEGRAM_DELIVERY_RATE", 25),
        support_attachment_dir=(environ.get("APP_SUPPORT_ATTACHMENT_DIR") or "").strip(),
        support_attachment_max_bytes=_positive_int(environ, "APP_SUPPORT_ATTACHMENT_MAX_BYTES", 5 << 20),
        worker_metrics_port=_port(environ, "APP_WORKER_METRICS_PORT", 0),
        worker_metrics_address=worker_metrics_address,
        public_url=public_url,
        yookassa_shop_id=yookassa_shop_id,
        yookassa_secret_key=yookassa_secret_key,
        yookassa_api_url=_base_url(environ, "APP_YOOKASSA_API_URL", YOOKASSA_API_URL),
        cryptobot_token=cryptobot_token,
        cryptobot_api_url=_base_url(environ, "APP_CRYPTOBOT_API_URL", CRYPTOBOT_API_URL),
        cookie_secure=_boolean(environ, "APP_COOKIE_SECURE", True),
        operator_idle_minutes=_idle_minutes(environ),
        trusted_proxy=_proxy_address(environ, "APP_TRUSTED_PROXY"),
        trusted_proxy_count=_positive_int(environ, "APP_TRUSTED_PROXY_COUNT", 1),
        yookassa_webhook_addresses=_networks(
            environ, "APP_YOOKASSA_WEBHOOK_ADDRESSES", YOOKASSA_NOTIFICATION_ADDRESSES
        ),
        webhook_rate_limit=_positive_int(environ, "APP_WEBHOOK_RATE_LIMIT", WEBHOOK_RATE_LIMIT),
        outbox_retry_base_ms=_positive_int(environ, "APP_OUTBOX_RETRY_BASE_MS", 10_000),
        outbox_allow_private_destinations=_boolean(environ, "APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS", False),
        telegram_api_url=_base_url(environ, "APP_TELEGRAM_API_URL", TELEGRAM_API_URL),
        telegram_operator_chat_id=_chat_id(environ, "APP_TELEGRAM_OPERATOR_CHAT_ID"),
        telegram_required_channel=_channel(environ, "APP_TELEGRAM_REQUIRED_CHANNEL"),
        bot_lease_ttl_seconds=_bot_lease_ttl(environ),
        topup_max_minor=_topup_max(environ, "APP_TOPUP_MAX_MINOR"),
        telemetry_url=_base_url(environ, "APP_TELEMETRY_URL"),
        telemetry_collector=_boolean(environ, "APP_TELEMETRY_COLLECTOR", False),
    )
