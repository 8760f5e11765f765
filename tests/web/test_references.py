"""SPEC 13.14: a key or correlation id shows the order or subscription it names as a
link (`order:5` → order 5), and is never markup."""

from web.references import linked


def test_an_order_named_by_a_key_or_correlation_id_is_a_link_to_the_order():
    assert linked("order:5") == '<a href="/panel/orders/5">order:5</a>'
    assert linked("order:5:fulfill") == '<a href="/panel/orders/5">order:5</a>:fulfill'
    assert linked("refund:12:disable") == '<a href="/panel/orders/12">refund:12</a>:disable'
    assert linked("gift:7:fulfill").startswith('<a href="/panel/orders/7">')


def test_a_panel_change_key_links_its_subscription():
    key = "panel:3f3ffcd0-a799-41d3-9e0a-ebc077a2da22:disable:form-1"
    assert linked(key) == (
        '<a href="/panel/subscriptions/3f3ffcd0-a799-41d3-9e0a-ebc077a2da22">'
        "panel:3f3ffcd0-a799-41d3-9e0a-ebc077a2da22</a>:disable:form-1"
    )
    assert linked("panel:form-1") == "panel:form-1"  # a correlation id names the request only


def test_anything_else_is_escaped_text():
    assert linked("scheduler:2026-12-01T12:00") == "scheduler:2026-12-01T12:00"
    assert linked("order:5x") == "order:5x"
    assert linked('<b onclick="x">') == "&lt;b onclick=&quot;x&quot;&gt;"
    assert linked("order:5:<i>") == '<a href="/panel/orders/5">order:5</a>:&lt;i&gt;'
    assert linked(None) == ""
