"""SPEC 6, 14.6: an operator queues a campaign or an announcement from the panel API and follows its delivery;
bad input is a 4xx with its code and writes nothing."""

import requests

from models.campaigns import Campaign, CampaignRecipient
from models.commerce import Customer
from models.ops import AuditEvent
from tests.web.test_admin_api import assert_problem
from tests.web.test_panel_api import REASON, session_of

TEXT = "New servers in Helsinki: pick them in the app."


def reachable(count):
    return [Customer.create(display_name=f"user {index}", telegram_id=9000 + index).id for index in range(count)]


def post(web, headers, body):
    return requests.post(f"{web}/v1/panel/campaigns", headers=headers, json=body, timeout=10)


def test_an_operator_queues_a_campaign_for_every_reachable_customer_and_follows_it(web):
    reachable(3)
    Customer.create(display_name="web only")
    headers = {**session_of(web), **REASON}
    answer = post(web, headers, {"text": TEXT})
    assert answer.status_code == 201, answer.text
    campaign = answer.json()["campaign"]
    assert (campaign["kind"], campaign["status"], campaign["recipients"]) == ("campaign", "sending", 3)
    assert campaign["delivery"] == {"pending": 3, "sending": 0, "sent": 0, "unreachable": 0, "failed": 0}
    assert campaign["createdBy"] == "operator:alice"
    [audit] = AuditEvent.select().where(AuditEvent.action == "campaign.created")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", REASON["X-Operator-Reason"],
                                                             str(campaign["id"]))  # fmt: skip
    CampaignRecipient.update(status="sent").where(CampaignRecipient.campaign == campaign["id"]).execute()
    shown = requests.get(f"{web}/v1/panel/campaigns/{campaign['id']}", headers=headers, timeout=10).json()["campaign"]
    assert shown["delivery"]["sent"] == 3


def test_an_announcement_to_named_customers_goes_to_those_only(web):
    first, _, third = reachable(3)
    headers = {**session_of(web), **REASON}
    answer = post(web, headers, {"kind": "announcement", "text": TEXT, "customerIds": [first, third, "nobody"]})
    assert answer.status_code == 201
    assert {r.customer_id for r in CampaignRecipient.select()} == {first, third}


def test_bad_campaigns_are_refused_with_their_code_and_write_nothing(web):
    reachable(1)
    headers = {**session_of(web), **REASON}
    for body, status, code in [
        ({"text": ""}, 400, "invalid_campaign_text"),
        ({"text": "x" * 4097}, 400, "invalid_campaign_text"),
        ({"text": 42}, 400, "invalid_campaign_text"),
        ({"kind": "spam", "text": TEXT}, 400, "invalid_campaign_kind"),
        ({"text": TEXT, "customerIds": []}, 400, "invalid_audience"),
        ({"text": TEXT, "customerIds": "everyone"}, 400, "invalid_audience"),
        ({"text": TEXT, "customerIds": ["nobody"]}, 422, "empty_audience"),
    ]:
        assert_problem(post(web, headers, body), status, code)
    assert_problem(post(web, session_of(web, name="bob"), {"text": TEXT}), 400, "reason_required")
    assert_problem(requests.get(f"{web}/v1/panel/campaigns/77", headers=headers, timeout=10), 404,
                   "campaign_not_found")  # fmt: skip
    assert_problem(requests.get(f"{web}/v1/panel/campaigns/x1", headers=headers, timeout=10), 400,
                   "invalid_campaign_id")  # fmt: skip
    assert Campaign.select().count() == 0 and CampaignRecipient.select().count() == 0
    assert AuditEvent.select().where(AuditEvent.action == "campaign.created").count() == 0
