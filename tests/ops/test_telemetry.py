"""SPEC 15.9, 6, 7: telemetry is off by default; a heartbeat carries counts and no personal data or secret;
a collector stores heartbeats over real HTTP, refuses anything else, and deletes them after 180 days."""

import dataclasses
import datetime
import json

import pytest
import requests

from config.settings import ConfigError, load_settings
from models.base import utcnow
from models.ops import OutboxDestination
from models.telemetry import TelemetryEvent
from ops import outbox, telemetry
from ops.operators import create_operator
from tests.support import sales
from tests.web.conftest import serving

DAY = datetime.timedelta(days=1)
SECRET = outbox.generate_secret()


def shop_with_people():
    """Customers, an operator, an order, a panel user, a sealed secret: every value a heartbeat must not carry."""
    buyer = sales.customer("Zelda Quintessa", "zelda_q_7731")
    other = sales.customer("Yorick Penhallow", "yorick_p_5519")
    order, settlement, _ = sales.paid_order(buyer, sales.plan("telemetry-plan"))
    subscription = sales.provision(settlement, username="omniflow_feedc0ffee123456")
    create_operator("operator-ingrid", "a-long-operator-password-77", ["system.read"])
    destination = OutboxDestination.create(url="https://hooks.example.org/in/tok-5e1f9a", topics="*", secret=SECRET)
    return [
        buyer.id, other.id, buyer.display_name, other.display_name, buyer.telegram_username, other.telegram_username,
        str(buyer.telegram_id), str(other.telegram_id), subscription.id, subscription.remote_username,
        "operator-ingrid", "hooks.example.org", "tok-5e1f9a", SECRET, SECRET[len("whsec_"):],
        OutboxDestination.select(OutboxDestination.secret).where(OutboxDestination.id == destination.id)
        .tuples()[0][0].text, "https://", "http://",
    ]  # fmt: skip


def test_telemetry_is_off_by_default_and_a_bad_url_stops_the_process():
    settings = load_settings(environ={})
    assert (settings.telemetry_url, settings.telemetry_collector) == ("", False)
    assert telemetry.start(settings) is None
    with pytest.raises(ConfigError) as bad:
        load_settings(environ={"APP_TELEMETRY_URL": "ftp://collector.example"})
    assert bad.value.variable == "APP_TELEMETRY_URL"


def test_the_heartbeat_sent_to_a_collector_carries_counts_and_no_id_name_token_link_or_secret(database, data_key):
    forbidden = shop_with_people()
    with serving({"APP_TELEMETRY_COLLECTOR": "true"}) as collector:
        settings = dataclasses.replace(load_settings(environ={}), telemetry_url=collector + "/v1/telemetry/heartbeat")
        stop = telemetry.start(settings)  # the web process's loop: one heartbeat at once
        try:
            deadline = utcnow() + datetime.timedelta(seconds=10)
            while not TelemetryEvent.select().exists() and utcnow() < deadline:
                stop.wait(0.05)
        finally:
            stop.set()
        refused = requests.post(settings.telemetry_url, json={"type": "installation.heartbeat"}, timeout=10)
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid_heartbeat")
    with serving() as not_a_collector:
        answer = requests.post(not_a_collector + "/v1/telemetry/heartbeat", json=telemetry.heartbeat(), timeout=10)
        assert (answer.status_code, answer.json()["code"]) == (404, "telemetry_collector_off")
    [event] = TelemetryEvent.select()
    body = json.loads(event.payload)
    assert body["type"] == "installation.heartbeat" and event.installation_id == body["installationId"]
    assert body["counts"] == {
        "customers": 2, "subscriptions": 1, "activeEntitlements": 1, "plansOnSale": 1, "paidOrders": 1,
        "operators": 1,
    }  # fmt: skip
    sent = json.dumps(telemetry.heartbeat())
    for value in forbidden:
        assert value not in event.payload and value not in sent, value
    assert telemetry.heartbeat()["installationId"] == body["installationId"]  # one id per installation
    assert TelemetryEvent.select().count() == 1  # the refused one wrote nothing


def test_the_collector_takes_exactly_the_heartbeats_shape_and_nothing_else():
    good = {
        "type": "installation.heartbeat", "installationId": "0123456789abcdef0123456789abcdef", "version": "0.9.0",
        "database": "sqlite", "sentAt": "2026-12-02T01:00:00Z", "counts": dict.fromkeys(telemetry.COUNTS, 3),
    }  # fmt: skip
    assert telemetry.check_heartbeat(good) == good
    for bad in (
        {**good, "email": "someone@example.com"},
        {**good, "type": "order.paid"},
        {**good, "installationId": "Robert'); DROP TABLE"},
        {**good, "database": ["sqlite"]},
        {**good, "counts": {**good["counts"], "customers": "many"}},
        {**good, "counts": {**good["counts"], "customers": True}},
        {**good, "counts": {**good["counts"], "names": 1}},
        [good],
    ):
        with pytest.raises(telemetry.HeartbeatRefused):
            telemetry.check_heartbeat(bad)


def test_the_collector_deletes_heartbeats_older_than_180_days(database):
    now = utcnow()
    for age in (181, 179, 1):
        telemetry.store(telemetry.heartbeat(), now=now - age * DAY)
    assert telemetry.collector_sweep(load_settings(environ={}), now=now) == 1
    assert sorted((now - e.received_at).days for e in TelemetryEvent.select()) == [1, 179]
