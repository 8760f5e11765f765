"""SPEC 12.2: secrets, links, ids and provider bodies never survive the redactor."""

from security.redactor import redact, register_secret


def test_registered_secret_values_are_removed():
    register_secret("op-token-1234567890")
    assert "op-token-1234567890" not in redact("compare failed for op-token-1234567890 at login")


def test_bearer_tokens_and_secret_pairs_are_removed():
    text = redact("Authorization: Bearer abc.def.ghi123456 password=hunter22 api_key: 'k-99887766'")
    for secret in ("abc.def.ghi123456", "hunter22", "k-99887766"):
        assert secret not in text


def test_subscription_links_keep_only_the_host():
    text = redact("GET https://vpn.example.com/api/sub/AbCdEf12345?token=zzz failed")
    assert "vpn.example.com" in text
    assert "AbCdEf12345" not in text and "zzz" not in text


def test_uuids_telegram_tokens_and_jwts_are_removed():
    text = redact(
        "squads 3f2504e0-4f89-41d3-9a0c-0305e82c3301 bot 123456789:AAHk9x_-abcdefghijklmnopqrstuvwxyz012 "
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"
    )
    for secret in ("3f2504e0-4f89", "AAHk9x_", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in text


def test_provider_bodies_are_removed():
    text = redact('remnawave_http_400: {"message": "Validation failed", "subscriptionUrl": "x"}')
    assert "subscriptionUrl" not in text and "remnawave_http_400" in text


def test_plain_error_text_and_code_identifiers_survive():
    text = "ConnectionError: panel unavailable in test_concurrent_duplicate_inserts_produce_one_job"
    assert redact(text) == text


def test_long_text_is_capped():
    assert len(redact("x " * 5000)) < 2100


def test_credentials_in_urls_are_removed_and_bare_hosts_left_readable():
    assert "pw-secret" not in redact("postgresql://omniflow:pw-secret@db:5432/omniflow")
    assert redact("Serving on http://0.0.0.0:8765/") == "Serving on http://0.0.0.0:8765/"
