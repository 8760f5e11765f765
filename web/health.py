"""Liveness and readiness (SPEC 11): /healthz answers while the process
runs; /readyz only when the database answers and every migration is applied."""

import json

import bottle

import migrations
from models.base import db


def build():
    app = bottle.Bottle()

    @app.get("/healthz")
    def healthz():
        bottle.response.content_type = "application/json"
        return json.dumps({"status": "ok"})

    @app.get("/readyz")
    def readyz():
        bottle.response.content_type = "application/json"
        try:
            db.execute_sql("SELECT 1")
            waiting = migrations.pending(db.obj)
        except Exception:
            bottle.response.status = 503
            return json.dumps({"status": "unavailable", "database": "unreachable"})
        finally:
            if not db.is_closed():
                db.close()
        if waiting:
            bottle.response.status = 503
            return json.dumps({"status": "unavailable", "database": "migrations pending"})
        return json.dumps({"status": "ready"})

    return app
