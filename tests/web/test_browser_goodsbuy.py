"""SPEC 15.4 in a real browser (headless Chromium through Playwright, as tests/web/test_browser.py): the owner
adds a goods provider and goods on the back office's Goods page, takes them off sale, and the pages fit a
laptop and a phone with every control labelled. Screenshots go to tests/artifacts/."""

import pytest

from goods.catalogue import add_provider
from models.goods import Goods
from models.ops import AuditEvent
from tests.web import test_panel_api as api
from tests.web.test_browser import ARTIFACTS, browser, sign_in  # noqa: F401 (browser is a fixture)

SIZES = {"desktop": (1366, 900), "phone": (390, 844)}
TOKEN = "browser-provider-token-0123456789"
# Controls without a name a screen reader could say: no aria-label, no <label> around or for them, and a
# button without text.
UNLABELLED = """() => [...document.querySelectorAll("input, select, textarea, button")].filter((control) => {
  if (control.type === "hidden" || control.getAttribute("aria-label")) return false;
  if (control.tagName === "BUTTON") return !control.innerText.trim();
  return !control.closest("label") && !(control.id && document.querySelector(`label[for="${control.id}"]`));
}).map((control) => control.outerHTML.slice(0, 120))"""
# Whether the page's own content (<main>; a wide table scrolls in its own box) is wider than the window. The
# shared header (layout.tpl: the operator's name and sign-out beside both navigation rows) overflows a phone's
# width on every page; this page's content must not add to it.
MAIN_OVERFLOWS = "() => document.querySelector('main').scrollWidth > document.querySelector('main').clientWidth"


def check_and_shoot(page, name):
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        assert page.evaluate(UNLABELLED) == []
        assert not page.evaluate(MAIN_OVERFLOWS), f"{name} overflows at {width}px"
        page.screenshot(path=str(ARTIFACTS / f"goodsbuy-{name}-{size}.png"), full_page=True)


@pytest.mark.parametrize("backend", ["sqlite"])  # the page, not the database, is under test here
def test_the_owner_adds_a_provider_and_goods_in_the_back_office_and_takes_them_off_sale(web, browser):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    api.operator("alice", ["payments.read", "payments.write"])
    add_provider("Existing provider", "https://existing.example", "existing-token-0123456789")
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, web)
    page.wait_for_url("**/panel")
    page.click("nav >> text=Goods")
    page.wait_for_url("**/panel/goods")
    check_and_shoot(page, "goods-empty")

    form = page.locator("#provider-add")
    form.locator("input[name=name]").fill("Vouchers Inc")
    form.locator("input[name=url]").fill("https://vouchers.example/api")
    form.locator("input[name=token]").fill(TOKEN)
    form.locator("input[name=reason]").fill("new supplier")
    with page.expect_navigation():
        form.locator("button").click()
    assert "Vouchers Inc" in page.locator("#goods-providers").inner_text()

    form = page.locator("#goods-add")
    form.locator("input[name=code]").fill("steam-10")
    form.locator("input[name=name]").fill("Steam 10")
    form.locator("select[name=providerId]").select_option(label="Vouchers Inc")
    form.locator("input[name=sku]").fill("steam-10-eu")
    form.locator("input[name=prices]").fill("RUB=99000 XTR=500")
    form.locator("input[name=reason]").fill("voucher line")
    with page.expect_navigation():
        form.locator("button").click()
    goods = Goods.get(Goods.code == "steam-10")
    row = page.locator(f'tr[data-goods="{goods.id}"]')
    assert "on sale" in row.inner_text() and "Vouchers Inc" in row.inner_text()
    check_and_shoot(page, "goods-added")

    row.locator("input[name=reason]").fill("supplier out of stock")
    with page.expect_navigation():
        row.locator("button", has_text="Deactivate").click()
    assert "off sale" in page.locator(f'tr[data-goods="{goods.id}"]').inner_text()
    assert TOKEN not in page.content()
    assert Goods.get_by_id(goods.id).active is False
    actions = [event.action for event in AuditEvent.select().order_by(AuditEvent.id)]
    assert actions[-3:] == ["panel.goods_provider.added", "panel.goods.added", "panel.goods.deactivated"]
