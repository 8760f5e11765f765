"""SPEC 13.14: every error code an operator can meet on a page is explained in plain
words with what to do, from one catalogue."""

from fulfillment import rules
from integrations import payments
from web.explanations import CATALOGUE, HTTP_CLIENT, HTTP_REDIRECT, HTTP_SERVER, UNKNOWN, explain, explained


def test_every_code_the_fulfillment_worker_stores_has_an_explanation():
    stored = {
        value
        for name, value in vars(rules).items()
        if name.isupper() and isinstance(value, str) and not name.startswith("NOTICE_")
    }
    assert stored and stored <= set(CATALOGUE)
    for code in stored:
        explanation = explain(code)
        assert explanation.meaning.endswith(".") and explanation.action.endswith(".")


def test_the_panels_http_answers_are_explained_by_their_class_of_status():
    assert explain("remnawave_http_302") is HTTP_REDIRECT
    assert explain("remnawave_http_400") is HTTP_CLIENT and explain("remnawave_http_422") is HTTP_CLIENT
    assert explain("remnawave_http_503") is HTTP_SERVER
    assert explain("remnawave_http_abc") is UNKNOWN


def test_the_payment_providers_webhook_refusals_are_explained():
    assert explain(payments.BAD_SIGNATURE) is CATALOGUE["bad_signature"]
    assert explain(payments.MALFORMED_WEBHOOK) is CATALOGUE["malformed_webhook"]


def test_no_code_shows_nothing_and_an_unknown_one_says_so():
    assert explain(None) is None and explained(None) == ""
    assert explain("something_new") is UNKNOWN
    assert explained("settled", known_only=True) == '<span class="code">settled</span>'


def test_the_html_escapes_the_code():
    html = explained("<script>x</script>")
    assert "<script>" not in html and "&lt;script&gt;" in html and "What to do:" in html
