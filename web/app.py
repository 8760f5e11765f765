"""The web process's WSGI application, and serving it with waitress."""

import datetime

import bottle

from commerce import providers
from web import (
    admin,
    backoffice,
    backoffice_codes,
    backoffice_messages,
    backoffice_pages,
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
    webhooks,
)

WEB_THREADS = 8


def create_app(settings):
    app = bottle.Bottle()
    app.config[panel.IDLE_CONFIG] = datetime.timedelta(minutes=settings.operator_idle_minutes)
    problems.install(app)
    guards.install(app, public_url=settings.public_url, hsts=settings.cookie_secure)
    offered = providers.from_settings(settings)
    app.merge(health.build())
    app.merge(admin.build(settings.operator_token))
    app.merge(checkout.build(settings.operator_token, offered, settings.public_url))
    app.merge(webhooks.build(offered))
    app.merge(panel.build(secure_cookies=settings.cookie_secure))
    app.merge(backoffice.build())
    app.merge(backoffice_codes.build())
    app.merge(campaigns.build())
    app.merge(support.build())
    app.merge(metrics.build(settings.operator_token))
    app.merge(openapi.build())
    app.merge(pages.build(secure_cookies=settings.cookie_secure))
    app.merge(backoffice_pages.build())
    app.merge(backoffice_messages.build(settings.support_attachment_dir))
    app.merge(operator_accounts.build())
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


def serve(app, port, host="0.0.0.0", **options):
    import waitress

    waitress.serve(app, host=host, port=port, threads=WEB_THREADS, ident="omniflow", **options)
