"""The back office's Campaigns and Support pages (SPEC 6, 14.4, 14.6) in the browser's HTML: their permissions
(the API's), what they show, their links to customers, and a ticket's attachments served only by the digest a row
of that ticket names."""

import hashlib
import re

import pytest
import requests

from models.campaigns import Campaign, CampaignRecipient
from models.ops import AuditEvent
from models.support import SupportTicket
from ops import campaign_expansion, support
from ops.campaigns import create_campaign
from tests.web import test_panel_api as api
from tests.web.conftest import serving
from tests.web.test_pages import page

# A JPEG's first bytes and then anything: the page serves what the file holds, it never decodes it.
PHOTO = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 4
SCRIPT = b"<script>alert(document.cookie)</script>"


@pytest.fixture
def attachment_dir(tmp_path):
    return tmp_path / "attachments"


@pytest.fixture
def web(database, data_key, attachment_dir):
    with serving({"APP_DATA_ENCRYPTION_KEY": data_key, "APP_SUPPORT_ATTACHMENT_DIR": str(attachment_dir)}) as base:
        yield base


@pytest.fixture
def outreach(attachment_dir):
    """Two customers with a chat, an announcement to both (one reached, one who blocked the bot), and a ticket
    with a text, a photo and a file that is not a picture."""
    from tests.support import sales

    reached, blocked = sales.customer("Alice Shopper", "alice_shop"), sales.customer("Bob Blocked", "bob_b")
    campaign = create_campaign("announcement", "Maintenance tonight at 02:00 UTC.", "operator:alice", "window")
    campaign_expansion.run()  # the worker's pass writes its recipients
    CampaignRecipient.update(status="sent").where(CampaignRecipient.customer == reached.id).execute()
    CampaignRecipient.update(status="unreachable", error_code="403").where(
        CampaignRecipient.customer == blocked.id
    ).execute()
    photo = support.store_file(str(attachment_dir), PHOTO)
    script = support.store_file(str(attachment_dir), SCRIPT)
    ticket, first = support.customer_writes(reached.id, reached.telegram_id, "My VPN is slow <b>today</b>")
    support.customer_writes(
        reached.id, reached.telegram_id, "", [(photo, len(PHOTO), "image/jpeg"), (script, len(SCRIPT), "text/html")]
    )
    return {"reached": reached, "blocked": blocked, "campaign": campaign, "ticket": ticket, "photo": photo,
            "script": script, "first": first}  # fmt: skip


def message_pages(outreach):
    ticket = outreach["ticket"].id
    return {
        "/panel/campaigns": "campaigns.write",
        f"/panel/campaigns/{outreach['campaign'].id}": "campaigns.write",
        "/panel/support": "support.read",
        f"/panel/support/tickets/{ticket}": "support.read",
        f"/panel/support/tickets/{ticket}/attachments/{outreach['photo']}": "support.read",
    }


def test_without_a_session_every_campaign_and_support_page_sends_the_browser_to_the_login_page(web, outreach):
    for path in message_pages(outreach):
        answer = page(web, path)
        assert answer.status_code == 303 and answer.headers["Location"].endswith("/panel/login"), path


@pytest.mark.parametrize("permissions", api.PERMISSION_SETS, ids=lambda p: "+".join(p) or "none")
def test_each_campaign_and_support_page_needs_the_permission_of_the_api_behind_it(web, outreach, permissions):
    headers = api.session_of(web, permissions=permissions)
    for path, needed in message_pages(outreach).items():
        answer = page(web, path, headers)
        if needed in permissions:
            assert answer.status_code == 200, (path, permissions)
        else:
            assert answer.status_code == 403 and needed in answer.text, (path, permissions)
            assert PHOTO not in answer.content
    ticket = page(web, f"/panel/support/tickets/{outreach['ticket'].id}", headers).text
    if "support.read" in permissions:  # the reply form only for who may reply
        assert ('id="reply"' in ticket) == ("support.write" in permissions)


def test_the_campaigns_page_lists_each_campaign_with_its_delivery_counts_and_the_form_that_queues_one(web, outreach):
    text = page(web, "/panel/campaigns", api.session_of(web)).text
    row = re.search(rf'<tr data-campaign="{outreach["campaign"].id}">(.*?)</tr>', text, re.DOTALL).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
    assert cells[1:4] == ["announcement", "all", "sending"]
    assert cells[5:11] == ["2", "1", "0", "1", "0", "0"]  # recipients, sent, failed, unreachable, left out, waiting
    assert f'href="/panel/campaigns/{outreach["campaign"].id}"' in row
    assert 'data-action="/v1/panel/campaigns"' in text and 'data-field="customerIds" data-list' in text
    assert '<option value="announcement">' in text and 'name="reason"' in text
    assert 'data-action="/v1/panel/campaigns/preview" data-show="preview"' in text and '"draft": true' in text
    assert '<option value="trial-only">' in text and 'data-field="startAt"' in text


def test_a_paused_campaigns_page_offers_resume_and_shows_whom_it_left_out(web, outreach):
    campaign = outreach["campaign"]
    Campaign.update(status="paused", left_out_blocked=3, left_out_unreachable=4).where(
        Campaign.id == campaign.id
    ).execute()
    headers = api.session_of(web)
    text = page(web, f"/panel/campaigns/{campaign.id}", headers).text
    assert 'id="left-out-blocked">3<' in text and 'id="left-out-unreachable">4<' in text
    assert f'data-action="/v1/panel/campaigns/{campaign.id}/resume"' in text
    assert f'data-action="/v1/panel/campaigns/{campaign.id}/pause"' not in text
    Campaign.update(status="done").where(Campaign.id == campaign.id).execute()
    assert 'id="campaign-actions"' not in page(web, f"/panel/campaigns/{campaign.id}", headers).text


def test_a_campaigns_page_shows_its_text_counts_and_who_it_did_not_reach_with_why(web, outreach):
    text = page(web, f"/panel/campaigns/{outreach['campaign'].id}", api.session_of(web)).text
    assert 'id="count-sent">1<' in text and 'id="count-unreachable">1<' in text and 'id="count-failed">0<' in text
    assert "Maintenance tonight at 02:00 UTC." in text
    assert f'data-action="/v1/panel/campaigns/{outreach["campaign"].id}/pause"' in text  # sending: pause only
    assert f'data-action="/v1/panel/campaigns/{outreach["campaign"].id}/resume"' not in text
    missed = text[text.index('<table id="missed">') :]
    assert f'href="/panel/customers/{outreach["blocked"].id}"' in missed
    assert f'href="/panel/customers/{outreach["reached"].id}"' not in missed
    assert "blocked the bot" in missed


def test_the_support_page_lists_tickets_of_a_status_and_says_what_a_bad_status_is(web, outreach):
    headers = api.session_of(web)
    text = page(web, "/panel/support", headers).text
    ticket = outreach["ticket"]
    assert f'<tr data-ticket="{ticket.id}">' in text and f'href="/panel/support/tickets/{ticket.id}"' in text
    assert f'href="/panel/customers/{outreach["reached"].id}"' in text
    assert re.search(rf'<tr data-ticket="{ticket.id}">.*?<td>2</td>', text, re.DOTALL)  # two messages
    assert 'data-ticket="' not in page(web, "/panel/support", headers, status="closed").text
    refused = page(web, "/panel/support", headers, status="everything")
    assert refused.status_code == 400 and 'id="status-error"' in refused.text
    assert "open, answered, closed" in refused.text


def test_a_tickets_page_shows_its_thread_escaped_with_the_photo_inline_and_the_other_file_as_a_link(web, outreach):
    ticket = outreach["ticket"]
    support.operator_replies(ticket.id, "alice", "Try the Helsinki server.", "reply")
    text = page(web, f"/panel/support/tickets/{ticket.id}", api.session_of(web)).text
    assert "My VPN is slow &lt;b&gt;today&lt;/b&gt;" in text and "<b>today</b>" not in text
    assert "Try the Helsinki server." in text and 'class="status-pending">pending<' in text
    photo_url = f"/panel/support/tickets/{ticket.id}/attachments/{outreach['photo']}"
    script_url = f"/panel/support/tickets/{ticket.id}/attachments/{outreach['script']}"
    assert f'<img src="{photo_url}"' in text
    assert f'href="{script_url}"' in text and f'<img src="{script_url}"' not in text
    assert f'data-action="/v1/panel/support/tickets/{ticket.id}/replies"' in text
    SupportTicket.update(status="closed").where(SupportTicket.id == ticket.id).execute()
    closed = page(web, f"/panel/support/tickets/{ticket.id}", api.session_of(web, "bob")).text
    assert 'id="reply"' not in closed and "This ticket is closed" in closed


def test_a_reply_to_a_customer_asks_for_no_reason_and_is_audited_without_one(web, outreach):
    ticket = outreach["ticket"]
    headers = api.session_of(web)
    form = re.search(r'<form[^>]*id="reply".*?</form>', page(web, f"/panel/support/tickets/{ticket.id}", headers).text,
                     re.DOTALL).group(0)  # fmt: skip
    assert "<textarea" in form and 'name="reason"' not in form
    url = f"{web}/v1/panel/support/tickets/{ticket.id}/replies"
    answer = requests.post(url, headers=headers, json={"text": "Try the Helsinki server."}, timeout=10)
    assert answer.status_code == 201, answer.text
    audit = AuditEvent.get(AuditEvent.action == "support.replied")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", None, str(ticket.id))


def test_an_attachment_is_served_by_the_digest_its_row_names_with_a_type_that_cannot_run_as_a_page(web, outreach):
    headers = api.session_of(web)
    base = f"/panel/support/tickets/{outreach['ticket'].id}/attachments"
    photo = page(web, f"{base}/{outreach['photo']}", headers)
    assert photo.status_code == 200 and photo.content == PHOTO
    assert photo.headers["Content-Type"] == "image/jpeg" and photo.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in photo.headers["Content-Security-Policy"]
    script = page(web, f"{base}/{outreach['script']}", headers)
    assert script.status_code == 200 and script.headers["Content-Type"] == "application/octet-stream"
    assert script.headers["Content-Disposition"].startswith("attachment")


def test_an_attachment_of_another_ticket_a_made_up_digest_or_a_path_is_404_and_never_a_file(web, outreach, tmp_path):
    headers = api.session_of(web)
    other = support.customer_writes(outreach["blocked"].id, outreach["blocked"].telegram_id, "hello")[0]
    (tmp_path / "secret.txt").write_text("not an attachment")
    unknown = hashlib.sha256(b"never uploaded").hexdigest()
    for path in (
        f"/panel/support/tickets/{other.id}/attachments/{outreach['photo']}",  # the file exists, not this ticket's
        f"/panel/support/tickets/{outreach['ticket'].id}/attachments/{unknown}",
        f"/panel/support/tickets/{outreach['ticket'].id}/attachments/..%2Fsecret.txt",
        f"/panel/support/tickets/{outreach['ticket'].id}/attachments/{outreach['photo'].upper()}",
        f"/panel/support/tickets/{outreach['ticket'].id}/attachments/%2E%2E",
    ):
        answer = page(web, path, headers)
        assert answer.status_code == 404, path
        assert PHOTO not in answer.content and b"not an attachment" not in answer.content


def test_an_attachment_whose_file_is_gone_says_so(web, outreach, attachment_dir):
    (attachment_dir / outreach["photo"]).unlink()
    answer = page(web, f"/panel/support/tickets/{outreach['ticket'].id}/attachments/{outreach['photo']}",
                  api.session_of(web))  # fmt: skip
    assert answer.status_code == 404 and "APP_SUPPORT_ATTACHMENT_DIR" in answer.text


@pytest.mark.parametrize(
    "path",
    ["/panel/campaigns/0", "/panel/campaigns/x", "/panel/campaigns/99999999999999999999", "/panel/campaigns/٣",
     "/panel/support/tickets/-1", "/panel/support/tickets/999999", "/panel/support/tickets/1e3",
     "/panel/support/tickets/x/attachments/y"],
)  # fmt: skip
def test_a_hostile_id_is_a_plain_4xx_page(web, path):
    answer = page(web, path, api.session_of(web))
    assert answer.status_code in (400, 404), path
    assert answer.headers["Content-Type"].startswith("text/html") and "Traceback" not in answer.text


def test_a_customers_page_links_their_tickets_for_who_may_read_support(web, outreach):
    path = f"/panel/customers/{outreach['reached'].id}"
    text = page(web, path, api.session_of(web)).text
    assert f'<tr data-ticket="{outreach["ticket"].id}">' in text
    assert f'href="/panel/support/tickets/{outreach["ticket"].id}"' in text
    without = page(web, path, api.session_of(web, "bob", ["subscriptions.read"])).text
    assert 'data-ticket="' not in without and "need the support.read permission" in without


def test_every_campaign_and_support_page_shows_times_in_the_operators_time_zone(web, outreach):
    from models.operators import Operator

    headers = api.session_of(web)
    Operator.update(time_zone="Asia/Tokyo").where(Operator.username == "alice").execute()
    for path in list(message_pages(outreach))[:4] + [f"/panel/customers/{outreach['reached'].id}"]:
        shown = page(web, path, headers).text
        times = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z)", shown)
        assert times and set(times) == {"+09:00"}, (path, set(times))
