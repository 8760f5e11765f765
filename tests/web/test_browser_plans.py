"""SPEC 13.1, 13.14 in a real browser: the owner opens Plans in the back office, is told in words why a plan
with no days is refused, creates a plan, and a person pressing Buy on the fake Telegram chat page sees it at
once, from a real bot process. Screenshots of the page at a laptop's and a phone's size go to tests/artifacts/."""

import pytest

from models.commerce import Plan
from models.ops import AuditEvent
from tests.bot.conftest import bots, fake_telegram  # noqa: F401  (the bot process and the fake Bot API)
from tests.web import test_panel_api as api
from tests.web.test_browser import ARTIFACTS, browser, sign_in  # noqa: F401  (the Chromium fixture)

pytestmark = pytest.mark.processes

SIZES = ((1366, 900), (390, 844))
# Controls a person cannot name: no <label>, aria-label or title for a field, no text for a button.
UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')].filter(c =>
  c.type !== 'hidden' && !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.title
  && !(c.tagName === 'BUTTON' && c.textContent.trim())).map(c => c.outerHTML)"""
WIDE = """() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >
  document.documentElement.clientWidth).map(e => e.tagName + '.' + e.className)"""
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def looked_at(page, name):
    """Screenshots at both sizes; no horizontal scrolling and no unlabelled control at either."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        assert page.evaluate(OVERFLOW) <= 0, (f"{name} scrolls sideways at {width}px", page.evaluate(WIDE))
        assert page.evaluate(UNLABELLED) == [], name
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})


@pytest.mark.parametrize("backend", ["sqlite"])  # the page, the bot and the browser are under test here
def test_the_owner_creates_a_plan_in_the_back_office_and_the_bot_offers_it_at_once(web, bots, fake_telegram, browser):  # noqa: F811
    api.operator("alice", api.EVERYTHING)
    bot = bots.start()
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, web)
    page.wait_for_url("**/panel")
    page.click("nav >> text=Plans")
    page.wait_for_url("**/panel/plans")

    form = page.locator("#new-plan form")
    form.locator("input[name=code]").fill("quarter")
    form.locator("input[name=name]").fill("Quarter")
    form.locator("input[name=durationDays]").fill("0")
    form.locator("input[name=price-XTR]").fill("600")
    form.locator("input[name=price-RUB]").fill("499.00")
    form.locator("input[name=deviceLimit]").fill("5")
    form.locator("input[name=reason]").fill("a longer plan for autumn")
    form.locator("button", has_text="Create the plan").click()
    form.locator(".error", has_text="whole number of days").wait_for(timeout=10000)  # words, not a code
    assert Plan.select().count() == 0

    form.locator("input[name=durationDays]").fill("90")
    with page.expect_navigation():
        form.locator("button", has_text="Create the plan").click()
    row = page.locator("#plans tr", has_text="Quarter")
    assert "on sale" in row.inner_text() and "499.00 RUB" in row.inner_text() and "unlimited" in row.inner_text()
    audit = AuditEvent.get(AuditEvent.action == "catalogue.plan.created")
    assert (audit.actor, audit.reason) == ("operator:alice", "a longer plan for autumn")
    looked_at(page, "plans")

    bots.wait_polling(bot)
    chat = browser.new_page(viewport={"width": 800, "height": 800})
    chat.goto(fake_telegram.chat_url)
    chat.fill("#user-id", "3010")
    chat.select_option("#user-lang", "en")
    chat.fill("#user-name", "Ann")
    chat.fill("#text", "/start")
    chat.click("button[type=submit]")
    chat.click("text=Buy", timeout=20000)
    chat.wait_for_selector(".bot .keyboard button:has-text('Quarter, 90 days')", timeout=10000)
    chat.screenshot(path=str(ARTIFACTS / "bot-chat-page-new-plan.png"), full_page=True)
