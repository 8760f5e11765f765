"""What another site's page can do to the panel through a visitor's browser: nothing. Sign-in and every change
made with the session cookie come from the panel's own origin; JSON bodies are read only as application/json;
pages run only the scripts they carry with this answer's nonce and are never framed, sniffed or cached."""

import json
import re

import requests

from models.commerce import Order
from models.operators import OperatorSession
from models.ops import MaintenanceState
from ops import maintenance
from tests.web import test_panel_api as api
from tests.web.conftest import OPERATOR_TOKEN, serving
from tests.web.test_admin_api import assert_problem

CREDENTIALS = json.dumps({"username": "alice", "password": api.PASSWORD})
ELSEWHERE = "https://attacker.example"


def sign_in(base, headers, body=CREDENTIALS):
    return requests.post(base + "/v1/panel/session", data=body, headers=headers, timeout=10)


def test_a_cross_site_text_plain_form_post_to_sign_in_signs_no_one_in(web):
    api.operator()
    # What an auto-submitting <form enctype="text/plain"> on another site sends from the visitor's browser.
    forged = {"Origin": ELSEWHERE, "Content-Type": "text/plain", "Referer": ELSEWHERE + "/win-a-prize"}
    answer = sign_in(web, forged)
    assert_problem(answer, 403, "cross_origin_refused")
    assert "omniflow_session" not in answer.headers.get("Set-Cookie", "")
    assert OperatorSession.select().count() == 0
    for origin in ("null", "http://127.0.0.1.attacker.example", web.replace("http://", "https://")):
        answer = sign_in(web, {"Origin": origin, "Content-Type": "application/json"})
        assert_problem(answer, 403, "cross_origin_refused")
    # Without Origin, the Referer says where the request comes from.
    referred = {"Referer": ELSEWHERE + "/", "Content-Type": "application/json"}
    assert_problem(sign_in(web, referred), 403, "cross_origin_refused")
    assert OperatorSession.select().count() == 0


def test_a_json_route_refuses_a_body_that_is_not_application_json_with_415(web):
    api.operator()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"Origin": web, **({"Content-Type": content_type} if content_type else {})}
        answer = sign_in(web, headers)
        assert_problem(answer, 415, "unsupported_media_type")
        assert "application/json" in answer.json()["detail"]
    assert OperatorSession.select().count() == 0
    cookie = api.session_of(web, "bob")
    url = web + "/v1/panel/system/maintenance"
    answer = requests.post(url, data='{"active": true}', headers={**cookie, **api.REASON}, timeout=10)
    assert_problem(answer, 415, "unsupported_media_type")
    assert not MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW).active


def test_checkout_refuses_a_body_that_is_not_application_json_and_writes_nothing(web):
    body = json.dumps({"customerId": "c", "kind": "topup", "provider": "wallet", "currency": "RUB", "requestId": "r"})
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "text/plain"}
    answer = requests.post(web + "/v1/checkout", data=body, headers=headers, timeout=10)
    assert_problem(answer, 415, "unsupported_media_type")
    assert Order.select().count() == 0


def test_sign_in_from_the_panels_own_origin_or_from_no_browser_is_accepted(web):
    api.operator()
    for headers in ({"Origin": web}, {"Referer": web + "/panel/login"}, {"Origin": web + "/"}, {}):
        answer = sign_in(web, {**headers, "Content-Type": "application/json; charset=utf-8"})
        assert answer.status_code == 200, (headers, answer.text)
    assert OperatorSession.select().count() == 4


def test_a_change_with_the_session_cookie_from_another_site_is_refused_and_changes_nothing(web):
    cookie = api.session_of(web)
    forged = {**cookie, **api.REASON, "Origin": ELSEWHERE}
    url = web + "/v1/panel/system/maintenance"
    assert_problem(requests.post(url, json={"active": True}, headers=forged, timeout=10), 403, "cross_origin_refused")
    assert not MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW).active
    # Signing the visitor out is a change too.
    assert_problem(requests.delete(web + "/v1/panel/session", headers=forged, timeout=10), 403, "cross_origin_refused")
    assert api.get(web, "/v1/panel/session", cookie).status_code == 200
    own = {**cookie, **api.REASON, "Origin": web}
    assert requests.post(url, json={"active": True}, headers=own, timeout=10).status_code == 200
    assert MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW).active


def test_behind_the_trusted_proxy_the_origin_the_browser_used_is_the_panels_own(database):
    api.operator()
    environ = {"APP_TRUSTED_PROXY": "127.0.0.1", "APP_PUBLIC_URL": "https://shop.example.com"}
    with serving(environ) as base:
        proxied = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "panel.example.com"}
        json_type = {"Content-Type": "application/json"}
        assert sign_in(base, {**proxied, **json_type, "Origin": "https://panel.example.com"}).status_code == 200
        assert sign_in(base, {**json_type, "Origin": "https://shop.example.com"}).status_code == 200  # APP_PUBLIC_URL
        refused = sign_in(base, {**proxied, **json_type, "Origin": "http://panel.example.com"})
        assert_problem(refused, 403, "cross_origin_refused")
    with serving() as base:  # no trusted proxy: a client's X-Forwarded-* headers name nothing
        spoofed = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "panel.example.com"}
        answer = sign_in(base, {**spoofed, "Content-Type": "application/json", "Origin": "https://panel.example.com"})
        assert_problem(answer, 403, "cross_origin_refused")


# -- headers ----------------------------------------------------------------------------------------------


def assert_shared_headers(answer):
    headers = answer.headers
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Frame-Options"] == "DENY"
    assert "no-store" in headers["Cache-Control"]


def script_policy(answer):
    policy = dict(
        (directive.split(" ", 1) + [""])[:2] for directive in answer.headers["Content-Security-Policy"].split("; ")
    )
    return policy


def test_pages_run_only_the_scripts_carrying_this_answers_nonce(web):
    cookie = api.session_of(web)
    nonces = set()
    for path in ("/panel/login", "/panel", "/panel/settings", "/panel/system/outbox", "/panel/system/operations"):
        answer = requests.get(web + path, headers=cookie, timeout=10)
        assert answer.status_code == 200, path
        assert_shared_headers(answer)
        policy = script_policy(answer)
        assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
        assert "unsafe-inline" not in policy["script-src"] and "unsafe-eval" not in policy["script-src"]
        [nonce] = re.fullmatch(r"'nonce-([A-Za-z0-9_-]{24})'", policy["script-src"]).groups()
        scripts = re.findall(r"<script([^>]*)>", answer.text)
        assert scripts and all(attributes == f' nonce="{nonce}"' for attributes in scripts), path
        assert not re.search(r"\son[a-z]+=", answer.text), path  # no inline handler, which no nonce can allow
        nonces.add(nonce)
    assert len(nonces) == 5  # one per answer


def test_json_answers_are_not_stored_sniffed_or_framed_and_hsts_follows_secure_cookies(web):
    cookie = api.session_of(web)
    for answer in (
        api.get(web, "/v1/panel/session", cookie),
        api.get(web, "/v1/panel/system/jobs", cookie),
        api.get(web, "/v1/panel/session", {}),  # a refusal too
    ):
        assert_shared_headers(answer)
        assert answer.headers["Cache-Control"] == "no-store"
        assert script_policy(answer)["default-src"] == "'none'"
        assert answer.headers["Strict-Transport-Security"] == "max-age=31536000"
    with serving({"APP_COOKIE_SECURE": "false"}) as base:
        answer = requests.get(base + "/panel/login", timeout=10)
        assert_shared_headers(answer)
        assert "Strict-Transport-Security" not in answer.headers
