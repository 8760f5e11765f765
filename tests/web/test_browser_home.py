"""Issue 21 item 5 in a real browser: the owner signs in and reads Home's charts — inline SVG
whose points are the ledger's revenue per day and currency — on a laptop (1366×900) and on a
phone (390×844), with nothing wider than the screen and every control labelled. Screenshots go
to tests/artifacts/."""

import datetime
import zoneinfo

from models.base import utcnow
from models.ledger import LedgerTransaction
from tests.support import sales
from tests.web import test_panel_api as api
from tests.web.test_browser import ARTIFACTS, browser, sign_in  # noqa: F401 (browser: the fixture)
from tests.web.test_home_charts import revenue_in_the_ledger
from web import home, local_time

UTC = zoneinfo.ZoneInfo("UTC")
SIZES = ((1366, 900), (390, 844))
OVERFLOWS = "document.documentElement.scrollWidth > document.documentElement.clientWidth"
# Inputs, selects, text areas and buttons with no name a screen reader could say.
UNLABELLED = """() => [...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
  .filter((c) => !(c.labels && c.labels.length) && !c.getAttribute("aria-label") && !c.getAttribute("title")
    && !(c.tagName === "BUTTON" && c.textContent.trim())).map((c) => c.outerHTML)"""
POINTS = "rects => rects.map(r => [r.dataset.day, Number(r.dataset.value)])"


def test_an_owner_reads_homes_charts_matching_the_ledger_on_a_laptop_and_a_phone(web, browser, ledger_invariant):  # noqa: F811
    api.operator("alice", api.EVERYTHING)
    buyer, plan = sales.customer(), sales.plan()
    rub, settlement, _ = sales.paid_order(buyer, plan, "RUB")
    usd, _, _ = sales.paid_order(buyer, plan, "USD", provider="cryptobot")
    sales.provision(settlement)
    three_days_ago = utcnow().replace(hour=12, minute=0, second=0, microsecond=0) - datetime.timedelta(days=3)
    LedgerTransaction.update(created_at=three_days_ago).where(LedgerTransaction.order == usd.id).execute()
    dates, _, _ = local_time.last_days(utcnow(), UTC, home.DAYS)  # alice's zone: UTC
    in_ledger = revenue_in_the_ledger(dates, UTC)

    page = browser.new_page(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    sign_in(page, web)
    page.wait_for_url("**/panel")
    assert "299.00 RUB" in page.locator("#revenue").inner_text()
    for currency in ("RUB", "USD"):
        chart = page.locator(f"svg#chart-revenue-{currency}")
        assert chart.is_visible()
        assert chart.get_attribute("role") == "img"
        shown = dict(chart.locator("rect").evaluate_all(POINTS))
        assert shown == in_ledger[currency], currency
    assert dict(page.locator("svg#chart-revenue-USD rect").evaluate_all(POINTS))[dates[-4].isoformat()] == 399
    assert page.locator("#needs-you li").count() == 5
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})  # the page reflows; nothing is loaded again
        assert not page.evaluate(OVERFLOWS), f"Home is wider than {width} px"
        assert page.evaluate(UNLABELLED) == []
        box = page.locator("svg#chart-revenue-RUB").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width and box["height"] > 50
        page.screenshot(path=str(ARTIFACTS / f"home-{width}x{height}.png"), full_page=True)
