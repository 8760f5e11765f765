"""Outbox destinations go only to public addresses unless a setting allows private
receivers: refused as written when added, and on the address actually connected to,
resolved as each connection opens. Everything here stays on 127.0.0.1."""

import socket
import time

import pytest

from config.settings import ConfigError, load_settings
from fakes.webhook_receiver import FakeWebhookReceiver
from integrations import webhooks
from ops import outbox
from tests.integrations.test_webhooks import BODY, SECRET

NAME = "hooks.customer.test"  # a name that resolves, in these tests, to what each test says


@pytest.fixture
def private_refused():
    outbox.allow_private_destinations(False)
    yield
    outbox.allow_private_destinations(None)


@pytest.fixture
def receiver():
    """A receiver on 127.0.0.1."""
    on_loopback = FakeWebhookReceiver(SECRET).start()
    yield on_loopback
    on_loopback.stop()


@pytest.fixture
def sender():
    """A sender as production has it: public addresses only."""
    public_only = webhooks.WebhookSender(timeout=0.5)
    yield public_only
    public_only.close()


def resolving(monkeypatch, answers):
    """NAME resolves to the next of `answers` at each lookup; every other host as before. Returns the lookups."""
    lookups, real = [], socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != NAME:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return real(answers[min(len(lookups), len(answers)) - 1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://10.0.0.1/hooks",
        "http://192.168.1.20:8080/hooks",
        "http://[::1]/hooks",
        "http://[::ffff:127.0.0.1]/hooks",
        "http://[fe80::1%25eth0]/hooks",
        "http://0.0.0.0/hooks",
        "http://localhost:8000/hooks",
        "http://api.localhost/hooks",
        "http://2130706433/hooks",  # 127.0.0.1 as one number
        "http://0x7f.1/hooks",
        "http://224.0.0.1/hooks",
        "http://100.64.0.1/hooks",  # carrier-grade NAT
    ],
)
def test_a_destination_on_a_non_public_address_is_refused_in_any_spelling(private_refused, url):
    with pytest.raises(outbox.DestinationRejected) as refused:
        outbox.check_url(url)
    assert refused.value.code == outbox.PRIVATE_DESTINATION
    assert "APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS" in str(refused.value)


def test_public_addresses_and_names_are_accepted_as_written(private_refused):
    for url in ("https://hooks.example.net/in", "http://8.8.8.8/hooks", "https://[2001:4860:4860::8888]/"):
        assert outbox.check_url(url) == url


def test_a_setting_allows_private_receivers_for_on_premises_installs():
    assert load_settings(environ={}).outbox_allow_private_destinations is False
    allowed = load_settings(environ={"APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS": "true"})
    assert allowed.outbox_allow_private_destinations is True
    with pytest.raises(ConfigError, match="APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS"):
        load_settings(environ={"APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS": "sometimes"})
    outbox.allow_private_destinations(True)
    try:
        assert outbox.check_url("http://10.0.0.1/hooks") == "http://10.0.0.1/hooks"
    finally:
        outbox.allow_private_destinations(None)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_sender_never_connects_to_a_loopback_receiver(receiver, sender, host):
    url = receiver.url.replace("127.0.0.1", host)
    assert sender.post(url, SECRET, 41, BODY, time.time()) == webhooks.Answer(False, webhooks.WEBHOOK_ADDRESS_REFUSED)
    assert receiver.stats()["accepted"] == 0 and receiver.stats()["invalid_signatures"] == 0


def test_a_name_that_turns_inward_after_it_was_added_is_refused_when_sending(
    private_refused, receiver, sender, monkeypatch
):
    url = receiver.url.replace("127.0.0.1", NAME)
    assert outbox.check_url(url) == url  # a name: nothing to refuse as written
    lookups = resolving(monkeypatch, ["127.0.0.1"])
    assert sender.post(url, SECRET, 41, BODY, time.time()).code == webhooks.WEBHOOK_ADDRESS_REFUSED
    assert receiver.accepted() == [] and lookups == [NAME]
    on_premises = webhooks.WebhookSender(timeout=0.5, allow_private=True)
    try:
        assert on_premises.post(url, SECRET, 42, BODY, time.time()).delivered
    finally:
        on_premises.close()
    assert [item.webhook_id for item in receiver.accepted()] == ["42"]


def test_the_connection_goes_to_the_address_that_was_checked(sender, monkeypatch):
    # Public at the check, loopback at any later lookup: a connection that looked the name up
    # again would reach 127.0.0.1. Nothing is connected to: the attempt is recorded and refused.
    lookups = resolving(monkeypatch, ["93.184.216.34", "127.0.0.1"])
    attempts = []

    def create_connection(address, *args, **kwargs):
        attempts.append(address)
        raise ConnectionRefusedError("recorded, not connected")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    answer = sender.post(f"https://{NAME}:8443/hooks", SECRET, 41, BODY, time.time())
    assert answer.code == webhooks.WEBHOOK_UNAVAILABLE
    assert attempts == [("93.184.216.34", 8443)] and lookups == [NAME]


def test_through_a_proxy_the_hosts_addresses_are_checked_before_it_is_asked(receiver, monkeypatch):
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", receiver.url.rsplit("/", 1)[0])  # a proxy would forward it; none is asked
    sender = webhooks.WebhookSender(timeout=0.5)
    try:
        answer = sender.post(receiver.url, SECRET, 41, BODY, time.time())
    finally:
        sender.close()
    assert answer.code == webhooks.WEBHOOK_ADDRESS_REFUSED
    assert receiver.stats()["accepted"] == 0 and receiver.stats()["invalid_signatures"] == 0
