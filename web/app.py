"""The web process's WSGI application, and serving it with waitress.

On SIGTERM (what a platform sends at a deploy) or SIGINT the server stops
accepting connections, lets the requests already received finish and their
answers go out — for at most SHUTDOWN_GRACE_S, inside the platform's 30 s
before SIGKILL — and `serve` returns, so the process exits 0. A second signal
ends the wait at once.
"""

import datetime
import logging
import signal
import time

import bottle

from commerce import providers
from web import (
    admin,
    backoffice,
    backoffice_anomalies,
    backoffice_bulk,
    backoffice_codes,
    backoffice_goods,
    backoffice_messages,
    backoffice_orders,
    backoffice_pages,
    backoffice_plans,
    bulk,
    campaigns,
    checkout,
    guards,
    health,
    metrics,
    openapi,
    operator_accounts,
    pages,
    panel,
    problems,
    support,
    telemetry,
    webhooks,
)

WEB_THREADS = 8
SHUTDOWN_GRACE_S = 25  # platforms (Heroku, Kubernetes' default) send SIGKILL 30 s after SIGTERM
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

logger = logging.getLogger("omniflow.web")


def create_app(settings):
    app = bottle.Bottle()
    app.config[panel.IDLE_CONFIG] = datetime.timedelta(minutes=settings.operator_idle_minutes)
    problems.install(app)
    guards.install(app, public_url=settings.public_url, hsts=settings.cookie_secure)
    offered = providers.from_settings(settings)
    app.merge(health.build())
    app.merge(admin.build(settings.operator_token))
    app.merge(checkout.build(settings.operator_token, offered, settings.public_url, settings.topup_max_minor))
    app.merge(webhooks.build(offered, settings))
    app.merge(panel.build(secure_cookies=settings.cookie_secure))
    app.merge(backoffice.build())
    app.merge(backoffice_orders.build())
    app.merge(backoffice_codes.build())
    app.merge(backoffice_anomalies.build())
    app.merge(backoffice_goods.build())
    app.merge(backoffice_plans.build())
    app.merge(campaigns.build())
    app.merge(bulk.build())
    app.merge(support.build())
    app.merge(metrics.build(settings.metrics_token))
    app.merge(openapi.build())
    app.merge(pages.build(secure_cookies=settings.cookie_secure))
    app.merge(backoffice_pages.build())
    app.merge(backoffice_bulk.build())
    app.merge(backoffice_messages.build(settings.support_attachment_dir))
    app.merge(operator_accounts.build())
    app.merge(telemetry.build(settings.telemetry_collector))
    return app


def server_options(settings):
    """waitress' options for this deployment. Behind the reverse proxy named by
    APP_TRUSTED_PROXY, waitress takes the client's address from X-Forwarded-For
    (APP_TRUSTED_PROXY_COUNT hops from the right), and the scheme and host the
    browser used from X-Forwarded-Proto and X-Forwarded-Host (the panel's own
    origin, web/guards.py); otherwise it is the peer's address and waitress
    strips those headers, so a client cannot choose the address its sign-ins
    are throttled under."""
    if not settings.trusted_proxy:
        return {}
    return {
        "trusted_proxy": settings.trusted_proxy,
        "trusted_proxy_count": settings.trusted_proxy_count,
        "trusted_proxy_headers": {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"},
    }


def serve(app, port, host="0.0.0.0", grace_s=SHUTDOWN_GRACE_S, **options):
    """Serve until SIGTERM or SIGINT, then drain (see the module's docstring) and return."""
    from waitress import wasyncore
    from waitress.server import create_server

    server = create_server(app, host=host, port=port, threads=WEB_THREADS, ident="omniflow", **options)
    signals = []
    for number in STOP_SIGNALS:
        signal.signal(number, lambda number, frame: signals.append(number))
    logger.info(f"web serving on {host}:{port}", extra={"port": port})

    def loop_once():
        # The poll wakes at a signal (or after its timeout of a second at most).
        wasyncore.loop(
            timeout=server.adj.asyncore_loop_timeout, map=server._map, use_poll=server.adj.asyncore_use_poll, count=1
        )

    while not signals:
        loop_once()
    wasyncore.dispatcher.close(server)  # the listening socket: new connections are refused from here on
    deadline = time.monotonic() + grace_s
    logger.info(
        f"web stopping on {signal.Signals(signals[0]).name}: finishing {_in_flight(server)} request(s) in flight",
        extra={"grace_s": grace_s},
    )
    while _in_flight(server) and len(signals) == 1 and time.monotonic() < deadline:
        loop_once()
    left = _in_flight(server)
    server.task_dispatcher.shutdown(cancel_pending=True, timeout=1)
    wasyncore.close_all(server._map)
    if left:
        logger.warning(f"web stopped with {left} request(s) unfinished", extra={"grace_s": grace_s})
    else:
        logger.info("web stopped: every request in flight was answered")


def _in_flight(server):
    """Connections with a request received (or being received) whose answer has not all gone out."""
    return sum(
        1
        for channel in list(server.active_channels.values())
        if channel.request is not None or channel.requests or channel.total_outbufs_len
    )
