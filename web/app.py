"""The web process's WSGI application, and serving it with waitress."""

import bottle

from web import admin, health, metrics, openapi, pages, panel, problems

WEB_THREADS = 8


def create_app(settings):
    app = bottle.Bottle()
    problems.install(app)
    app.merge(health.build())
    app.merge(admin.build(settings.operator_token))
    app.merge(panel.build())
    app.merge(metrics.build(settings.operator_token))
    app.merge(openapi.build())
    app.merge(pages.build())
    return app


def serve(app, port, host="0.0.0.0"):
    import waitress

    waitress.serve(app, host=host, port=port, threads=WEB_THREADS, ident="omniflow")
