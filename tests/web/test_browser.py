"""SPEC 4.4 and 13.14 in a real browser: headless Chromium (Debian's, driven by
Playwright) signs in, opens System → Operations, retries a failed operation with a
reason and sees it move to pending; finds a customer, opens their page, follows an
order to its operation and back, refunds part of it and the rest to the wallet; reads a support ticket with its
photo, replies, and queues an announcement. Screenshots go to tests/artifacts/."""

import shutil
from pathlib import Path

import pytest

from models.fulfillment import FulfillmentOperation
from models.ops import AuditEvent
from tests.web import test_panel_api as api

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"


# Another machine on the LAN reaches the server by a name, over plain HTTP: a page the
# browser does not count as secure, unlike 127.0.0.1 or localhost.
LAN_HOST = "omniflow.test"


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: scripts/test.sh installs Debian's chromium package")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", f"--host-resolver-rules=MAP {LAN_HOST} 127.0.0.1"],
        )
        yield launched
        launched.close()


def sign_in(page, base):
    page.goto(base + "/panel/login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", api.PASSWORD)
    page.click("button[type=submit]")


def from_the_lan(base):
    return base.replace("127.0.0.1", LAN_HOST)


def test_an_operator_signs_in_and_retries_a_failed_operation_with_a_reason(web, browser):
    api.operator("alice", ["system.read", "system.write"])
    failed = api.operation_in("failed")
    page = browser.new_page()
    page.goto(web + "/panel/system/operations")
    page.wait_for_url("**/panel/login")  # no session yet
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", api.PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/panel")  # Home
    page.click("nav >> text=Operations")
    page.wait_for_url("**/panel/system/operations")
    row = page.locator(f'tr[data-operation="{failed}"]')
    assert row.locator("td.status-failed").inner_text() == "failed"

    row.locator("input[name=reason]").fill("panel was down during checkout")
    with page.expect_navigation():
        row.locator("button", has_text="Retry").click()
    assert page.locator(f'tr[data-operation="{failed}"]').count() == 0  # no longer failed
    page.select_option("select[name=status]", "pending")
    with page.expect_navigation():
        page.click("form.filters button[type=submit]")
    moved = page.locator(f'tr[data-operation="{failed}"]')
    assert moved.locator("td.status-pending").inner_text() == "pending"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "operations-after-retry.png"), full_page=True)

    assert FulfillmentOperation.get_by_id(failed).status == "pending"
    audit = AuditEvent.get(AuditEvent.action == "panel.fulfillment.retried")
    assert (audit.actor, audit.reason) == ("operator:alice", "panel was down during checkout")


def test_an_operator_turns_maintenance_on_from_the_queue_page(web, browser):
    from ops import maintenance

    api.operator("alice", ["system.read", "system.write"])
    page = browser.new_page()
    page.goto(web + "/panel/login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", api.PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/panel")
    page.click("nav >> text=Queue")
    page.wait_for_url("**/panel/system/queue")
    box = page.locator("#maintenance")
    box.locator("input[name=reason]").fill("provider outage")
    with page.expect_navigation():
        box.locator("button", has_text="Turn on").click()
    assert "Maintenance mode is on" in page.locator("#maintenance").inner_text()
    assert maintenance.is_active()


def test_over_plain_http_from_another_machine_a_dropped_secure_cookie_is_explained_on_the_login_page(web, browser):
    api.operator("alice", ["system.read"])
    page = browser.new_page()
    sign_in(page, from_the_lan(web))
    notice = page.locator("#login-error")
    notice.wait_for(state="visible")
    assert "did not keep the session cookie" in notice.inner_text()
    assert "APP_COOKIE_SECURE=false" in notice.inner_text()
    assert page.url.endswith("/panel/login")


def test_with_app_cookie_secure_false_sign_in_works_over_plain_http_from_another_machine(database, browser):
    from tests.web.conftest import serving

    api.operator("alice", ["system.read"])
    with serving({"APP_COOKIE_SECURE": "false"}) as base:
        page = browser.new_page()
        sign_in(page, from_the_lan(base))
        page.wait_for_url("**/panel")
        assert page.locator("nav[aria-label=System]").is_visible()


def test_an_operator_finds_a_customer_follows_an_order_to_its_operation_and_refunds_part_of_it(
    web, browser, ledger_invariant
):
    from models.commerce import Order
    from models.payments import Refund
    from tests.support import sales
    from web import backoffice

    api.operator("alice", api.EVERYTHING)
    buyer = sales.customer("Alice Shopper", "alice_shop")
    order, settlement, _ = sales.paid_order(buyer, sales.plan())
    sales.provision(settlement)
    page = browser.new_page()
    sign_in(page, web)
    page.wait_for_url("**/panel")
    assert "299.00 RUB" in page.locator("#revenue").inner_text()
    page.click("nav >> text=Customers")
    page.wait_for_url("**/panel/customers")
    page.fill("input[name=q]", "@alice_shop")
    with page.expect_navigation():
        page.click("#customer-search button[type=submit]")
    page.locator(f'tr[data-customer="{buyer.id}"] a').click()
    page.wait_for_url(f"**/panel/customers/{buyer.id}")
    assert page.locator("#subscriptions td.phase-active").inner_text() == "active"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "customer.png"), full_page=True)

    page.locator(f'tr[data-order="{order.id}"] a.operation-link').click()
    page.wait_for_url(f"**/panel/system/operations/{settlement.operation_id}")
    page.locator(f'a[href="/panel/orders/{order.id}"]').first.click()  # the operation's order:<id>
    page.wait_for_url(f"**/panel/orders/{order.id}")
    form = page.locator("#refund")
    form.locator("input[name=amount]").fill("1.50")
    form.locator("input[name=reason]").fill("день простоя")  # a reason in Cyrillic reaches the audit as typed
    with page.expect_navigation():
        form.locator("button", has_text="Refund").click()
    assert page.locator("#order-status").inner_text() == "partially refunded"
    assert page.locator("#order-status").get_attribute("data-status") == "partially_refunded"
    assert page.locator("#refunded").inner_text() == "1.50 RUB"
    page.screenshot(path=str(ARTIFACTS / "order-after-partial-refund.png"), full_page=True)
    refunded = Order.get_by_id(order.id)
    assert (refunded.status, refunded.refunded_amount_minor) == ("partially_refunded", 150)
    audit = AuditEvent.get(AuditEvent.action == "panel.order.refunded")
    assert (audit.actor, audit.reason) == ("operator:alice", "день простоя")

    # The rest of it to the customer's wallet instead of back to the card.
    form = page.locator("#refund")
    form.locator("select[name=to]").select_option("wallet")
    form.locator("input[name=reason]").fill("customer asked for wallet credit")
    with page.expect_navigation():
        form.locator("button", has_text="Refund").click()
    assert page.locator("#order-status").inner_text() == "refunded"
    assert "to the customer's wallet (paid at YooKassa)" in page.locator("#refunds").inner_text()
    page.screenshot(path=str(ARTIFACTS / "order-after-refund-to-wallet.png"), full_page=True)
    refunds = Refund.select().where(Refund.order == order.id).order_by(Refund.id)
    assert [(r.destination, r.amount_minor) for r in refunds] == [("provider", 150), ("wallet", 29750)]
    assert backoffice.wallet_balances(buyer) == {"RUB": 29750}


def test_an_operator_reads_a_ticket_with_its_photo_replies_and_queues_an_announcement(database, browser, tmp_path):
    import io

    import segno

    from models.campaigns import Campaign
    from models.support import SupportMessage
    from ops import support
    from tests.support import sales
    from tests.web.conftest import serving

    api.operator("alice", api.EVERYTHING)
    buyer = sales.customer("Alice Shopper", "alice_shop")
    picture = io.BytesIO()
    segno.make("the error the customer saw").save(picture, kind="png", scale=6)
    digest = support.store_file(str(tmp_path), picture.getvalue())
    ticket = support.customer_writes(buyer.id, buyer.telegram_id, "The app says this:",
                                     [(digest, len(picture.getvalue()), "image/png")])[0]  # fmt: skip
    with serving({"APP_SUPPORT_ATTACHMENT_DIR": str(tmp_path)}) as base:
        page = browser.new_page()
        sign_in(page, base)
        page.wait_for_url("**/panel")
        page.click("nav >> text=Support")
        page.wait_for_url("**/panel/support")
        page.locator(f'tr[data-ticket="{ticket.id}"] td:first-child a').click()
        page.wait_for_url(f"**/panel/support/tickets/{ticket.id}")
        photo = page.locator(f'.attachment[data-digest="{digest}"] img')
        photo.wait_for(state="visible")
        # Served by the attachment route and decoded by the browser: a picture, not a broken image. Visible
        # comes before loaded: wait for its load (or its error, which leaves no width).
        loaded_width = (
            "img => img.complete ? img.naturalWidth : new Promise(done => {"
            " img.onload = () => done(img.naturalWidth); img.onerror = () => done(0); })"
        )
        assert photo.evaluate(loaded_width) > 0
        reply = page.locator("#reply")
        reply.locator("textarea[name=text]").fill("Thanks, we are on it: reinstall the profile, please.")
        assert reply.locator("input[name=reason]").count() == 0  # answering a customer is its own reason
        with page.expect_navigation():
            reply.locator("button", has_text="Send").click()
        assert page.locator("#ticket-status").inner_text() == "answered"
        assert "reinstall the profile" in page.locator(".message.operator").inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "support-ticket-after-reply.png"), full_page=True)
        sent = SupportMessage.get(SupportMessage.author == "operator")
        assert (sent.ticket_id, sent.push_status, sent.operator_username) == (ticket.id, "pending", "alice")
        audit = AuditEvent.get(AuditEvent.action == "support.replied")
        assert (audit.actor, audit.reason) == ("operator:alice", None)

        page.click("nav >> text=Campaigns")
        page.wait_for_url("**/panel/campaigns")
        form = page.locator("#new-campaign")
        form.locator("select[name=kind]").select_option("announcement")
        form.locator("textarea[name=text]").fill("Maintenance tonight at 02:00 UTC.")
        form.locator("textarea[name=customerIds]").fill(buyer.id)
        form.locator("button", has_text="Preview the audience").click()  # no reason needed: it writes nothing
        page.locator("#audience-preview", has_text="recipients: 1").wait_for()  # no eval: the page's CSP forbids it
        assert Campaign.select().count() == 0
        form.locator("input[name=reason]").fill("planned maintenance")
        with page.expect_navigation():
            form.locator("button", has_text="Queue it").click()
        campaign = Campaign.get()
        assert (campaign.kind, campaign.recipients) == ("announcement", 1)
        assert campaign.text == "Maintenance tonight at 02:00 UTC."
        page.locator(f'tr[data-campaign="{campaign.id}"] a').first.click()
        page.wait_for_url(f"**/panel/campaigns/{campaign.id}")
        assert page.locator("#count-pending").inner_text() == "1"
        assert page.locator("#campaign-text").inner_text() == "Maintenance tonight at 02:00 UTC."
        page.screenshot(path=str(ARTIFACTS / "campaign.png"), full_page=True)
        audit = AuditEvent.get(AuditEvent.action == "campaign.created")
        assert (audit.actor, audit.reason) == ("operator:alice", "planned maintenance")
