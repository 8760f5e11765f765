"""Issue 21 item 1 in a real browser (Debian's Chromium through Playwright): the owner opens Shop → Orders,
filters it, opens an order from the list, then exports the payments CSV from Shop → Payments and reads it
back. Every page added is screenshot at 1366×900 and 390×844 (tests/artifacts/), with no horizontal overflow
of its content and no control without a label."""

import csv
import io

import pytest

from tests.support import sales
from tests.web import test_panel_api as api
from tests.web.test_browser import ARTIFACTS, browser, sign_in  # noqa: F401  (browser: the fixture)

SIZES = ((1366, 900), (390, 844))
UNLABELLED = """() => [...document.querySelectorAll("input, select, textarea, button")]
  .filter((e) => e.type !== "hidden" && !(e.labels && e.labels.length) && !e.getAttribute("aria-label")
    && !(e.tagName === "BUTTON" && e.textContent.trim()))
  .map((e) => e.outerHTML)"""
# The page's own content (main): the shared header of web/templates/layout.tpl still overflows a phone's
# width (issue 21 item 7 is its own work), which document.documentElement would report for every page.
OVERFLOW = """() => { const main = document.querySelector("main");
  return main.scrollWidth > main.clientWidth || main.getBoundingClientRect().right > window.innerWidth; }"""


def looked_at(page, name):
    """Screenshots of the page at a laptop's and a phone's size; what overflows or is unlabelled fails."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}x{height}.png"), full_page=True)
        assert not page.evaluate(OVERFLOW), f"{name} overflows at {width}x{height}"
        assert page.evaluate(UNLABELLED) == [], name
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})


@pytest.mark.parametrize("backend", ["sqlite"])  # the reads are proved on both in test_order_payment_lists.py
def test_the_owner_filters_the_orders_opens_one_and_reads_back_the_payments_csv(web, browser):  # noqa: F811
    api.operator("alice", ["payments.read"])
    buyer = sales.customer("Ольга Петрова", "olga")
    plan = sales.plan()
    rub, _, rub_intent = sales.paid_order(buyer, plan)
    usd, _, usd_intent = sales.paid_order(buyer, plan, currency="USD", provider="cryptobot")
    page = browser.new_page(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    sign_in(page, web)
    page.wait_for_url("**/panel")
    page.click("nav >> text=Orders")
    page.wait_for_url("**/panel/orders")
    assert page.locator("tr[data-order]").count() == 2
    looked_at(page, "orders")
    page.fill("#filters input[name=currency]", "USD")
    with page.expect_navigation():
        page.click("#filters button[type=submit]")
    assert page.locator("tr[data-order]").count() == 1
    assert page.locator("#totals .total").get_attribute("data-amount-minor") == str(usd.amount_minor)
    page.locator(f'tr[data-order="{usd.id}"] a[href="/panel/orders/{usd.id}"]').click()
    page.wait_for_url(f"**/panel/orders/{usd.id}")
    assert page.locator("#order-status").get_attribute("data-status") == usd.status

    page.click("nav >> text=Payments")
    page.wait_for_url("**/panel/payments")
    looked_at(page, "payments")
    with page.expect_download() as downloading:
        page.click("#export-csv")
    download = downloading.value
    assert download.suggested_filename.startswith("payments-") and download.suggested_filename.endswith(".csv")
    with open(download.path(), encoding="utf-8-sig") as exported:
        rows = list(csv.reader(io.StringIO(exported.read())))
    assert rows[0][:3] == ["payment id", "created", "order id"]
    assert [int(row[0]) for row in rows[1:]] == [usd_intent.id, rub_intent.id]
    assert {row[5] for row in rows[1:]} == {"Ольга Петрова"} and rows[2][2] == str(rub.id)
