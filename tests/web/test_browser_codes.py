"""SPEC 13.11 and 13.14 in a real browser, the owner's day: find a customer by name (Cyrillic, in
capitals), issue 10 access codes on the codes page, see them once and take the CSV, and redeem one in
the bot's chat page. Screenshots of the pages at 1366x900 and 390x844 go to tests/artifacts/; a page
wider than the screen (its content: the shared header is not this page's) or a control without a label
fails the test."""

import pytest

from models.catalogue import AccessCode
from models.commerce import Customer
from tests.bot.conftest import bots, fake_telegram  # noqa: F401  (fixtures: the fake Bot API and real bots)
from tests.web import test_panel_api as api
from tests.web.test_browser import ARTIFACTS, browser, sign_in  # noqa: F401  (the Chromium fixture)

pytestmark = pytest.mark.processes

SIZES = {"laptop": (1366, 900), "phone": (390, 844)}
UNLABELLED = """() => [...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
  .filter((c) => !c.hidden && !(c.getAttribute("aria-label") || c.labels?.length || c.textContent.trim()))
  .map((c) => c.outerHTML)"""
# The page's own content (main) against the window: the shared header's phone layout is the layout's own work.
OVERFLOW = """() => [...document.querySelectorAll("main, main *")]
  .some((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
               && !e.closest(".table-scroll"))"""


def looked_at(page, name):
    """Screenshots at both sizes; fails on horizontal overflow or an unlabelled control."""
    ARTIFACTS.mkdir(exist_ok=True)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{size}.png"), full_page=True)
        assert not page.evaluate(OVERFLOW), f"{name} overflows sideways at {width}x{height}"
        assert page.evaluate(UNLABELLED) == [], name


@pytest.mark.parametrize("backend", ["sqlite"])  # the pages and the bot, not the database, are under test here
def test_an_owner_finds_a_customer_by_name_issues_ten_access_codes_and_one_is_redeemed_in_the_bot(
    web, bots, fake_telegram, browser  # noqa: F811  (the fixtures imported above)
):  # fmt: skip
    from tests.support import sales

    api.operator("alice", api.EVERYTHING)
    ivan = sales.customer("Иван Петров", "ivan_p")
    sales.customer("Dev User", "dev_user")
    sales.plan()
    bot = bots.start()
    bots.wait_polling(bot)

    page = browser.new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, web)
    page.wait_for_url("**/panel")
    page.click("nav >> text=Customers")
    page.fill("input[name=q]", "ИВАН")
    with page.expect_navigation():
        page.click("#customer-search button[type=submit]")
    rows = page.locator("#customers tr[data-customer]")
    assert rows.count() == 1 and rows.first.get_attribute("data-customer") == ivan.id
    assert rows.first.locator("td").first.inner_text() == "Иван Петров"  # the row leads with the name
    looked_at(page, "customers-by-name")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("#customers a")
    page.wait_for_selector("h2:text('Timeline')")
    looked_at(page, "customer-timeline")

    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("nav >> text=Codes")
    page.wait_for_url("**/panel/codes")
    form = page.locator("#codes-issue")
    form.locator("input[name=count]").fill("10")
    form.locator("input[name=maxActivations]").fill("3")
    form.locator("input[name=reason]").fill("spring promotion")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#codes-issued:not([hidden])", timeout=10000)
    codes = page.locator("#codes-issued-list").input_value().split()
    assert len(codes) == 10 and AccessCode.select().count() == 10
    with page.expect_download() as download:
        page.click("#codes-csv")
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0] == "id,kind,code" and [line.split(",")[2] for line in lines[1:]] == codes
    page.wait_for_selector("#codes-csv[hidden]", state="attached", timeout=5000)  # the CSV is taken once
    looked_at(page, "codes-issued")
    page.reload()
    assert page.locator("#access-codes tr[data-access-code]").count() == 10
    assert not any(code in page.content() for code in codes)  # shown once: gone after a reload
    looked_at(page, "codes-list")

    chat = browser.new_page(viewport={"width": 800, "height": 700})
    chat.goto(fake_telegram.chat_url)
    chat.fill("#user-id", "3010")
    chat.select_option("#user-lang", "en")
    chat.fill("#user-name", "Ann")
    chat.fill("#text", "/start")
    chat.click("button[type=submit]")
    chat.wait_for_selector("text=My subscriptions", timeout=20000)
    chat.fill("#text", f"/code {codes[3].lower()}")
    chat.click("button[type=submit]")
    chat.wait_for_selector("text=Code accepted", timeout=20000)
    chat.screenshot(path=str(ARTIFACTS / "bot-code-redeemed.png"), full_page=True)
    assert Customer.select().where(Customer.telegram_id == 3010).count() == 1
    assert AccessCode.select().where(AccessCode.activation_count == 1).count() == 1

    page.reload()
    assert page.locator("#access-codes td", has_text="1 of 3").count() == 1
