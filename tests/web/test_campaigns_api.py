"""SPEC 6, 14.6: an operator queues a campaign or an announcement from the panel API and follows its delivery;
bad input is a 4xx with its code and writes nothing."""

import datetime

import requests

from models.campaigns import Campaign, CampaignRecipient
from models.commerce import Customer, Plan
from models.ops import AuditEvent
from ops import campaign_expansion
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
    assert (campaign["kind"], campaign["status"], campaign["audience"]) == ("campaign", "sending", "all")
    assert (campaign["recipients"], campaign["expandedAt"]) == (0, None)  # written by the campaign_expansion pass
    assert campaign["createdBy"] == "operator:alice"
    [audit] = AuditEvent.select().where(AuditEvent.action == "campaign.created")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", REASON["X-Operator-Reason"],
                                                             str(campaign["id"]))  # fmt: skip
    campaign_expansion.run()
    shown = show(web, headers, campaign["id"])
    assert shown["recipients"] == 3 and shown["expandedAt"] is not None
    assert shown["delivery"] == {"pending": 3, "sending": 0, "sent": 0, "unreachable": 0, "failed": 0}
    CampaignRecipient.update(status="sent").where(CampaignRecipient.campaign == campaign["id"]).execute()
    assert show(web, headers, campaign["id"])["delivery"]["sent"] == 3


def show(web, headers, campaign_id):
    return requests.get(f"{web}/v1/panel/campaigns/{campaign_id}", headers=headers, timeout=10).json()["campaign"]


def change(web, headers, campaign_id, action):
    return requests.post(f"{web}/v1/panel/campaigns/{campaign_id}/{action}", headers=headers, timeout=10)


def test_an_operator_previews_an_audience_saves_a_draft_then_starts_pauses_and_resumes_it(web):
    first, second, third = reachable(3)
    Customer.update(blocked=True).where(Customer.id == second).execute()
    Customer.update(telegram_unreachable_at=Customer.created_at).where(Customer.id == third).execute()
    headers = {**session_of(web), **REASON}
    answer = requests.post(f"{web}/v1/panel/campaigns/preview", headers=headers, json={"audience": "all"}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["preview"] == {"audience": 3, "blocked": 1, "unreachable": 1, "recipients": 1}

    draft = post(web, headers, {"text": TEXT, "audience": "all", "draft": True}).json()["campaign"]
    assert (draft["status"], draft["startAt"]) == ("draft", None)
    campaign_expansion.run()
    assert show(web, headers, draft["id"])["recipients"] == 0  # a draft is not expanded
    started = change(web, headers, draft["id"], "start")
    assert started.status_code == 200 and started.json()["campaign"]["status"] == "sending"
    campaign_expansion.run()
    shown = show(web, headers, draft["id"])
    assert (shown["recipients"], shown["leftOut"]) == (1, {"blocked": 1, "unreachable": 1})
    assert change(web, headers, draft["id"], "pause").json()["campaign"]["status"] == "paused"
    assert_problem(change(web, headers, draft["id"], "pause"), 409, "campaign_state_conflict")
    assert change(web, headers, draft["id"], "resume").json()["campaign"]["status"] == "sending"
    actions = [
        e.action for e in AuditEvent.select().where(AuditEvent.subject_type == "campaign").order_by(AuditEvent.id)
    ]
    assert actions == ["campaign.created", "campaign.started", "campaign.paused", "campaign.resumed"]

    at = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)).replace(microsecond=0)
    moscow = at.astimezone(datetime.timezone(datetime.timedelta(hours=3))).isoformat()
    later = post(web, headers, {"text": TEXT, "startAt": moscow}).json()["campaign"]
    assert (later["status"], later["startAt"]) == ("scheduled", at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert change(web, headers, later["id"], "pause").json()["campaign"]["status"] == "paused"
    assert change(web, headers, later["id"], "resume").json()["campaign"]["status"] == "scheduled"


def test_an_announcement_to_named_customers_goes_to_those_only(web):
    first, _, third = reachable(3)
    headers = {**session_of(web), **REASON}
    answer = post(web, headers, {"kind": "announcement", "text": TEXT, "customerIds": [first, third, "nobody"]})
    assert answer.status_code == 201
    assert {r.customer_id for r in CampaignRecipient.select()} == {first, third}


def test_bad_campaigns_are_refused_with_their_code_and_write_nothing(web):
    reachable(1)
    plan_id = Plan.create(code="monthly", name="Monthly", duration_days=30, price_minor=100).id
    headers = {**session_of(web), **REASON}
    for body, status, code in [
        ({"text": ""}, 400, "invalid_campaign_text"),
        ({"text": "x" * 4097}, 400, "invalid_campaign_text"),
        ({"text": 42}, 400, "invalid_campaign_text"),
        ({"kind": "spam", "text": TEXT}, 400, "invalid_campaign_kind"),
        ({"text": TEXT, "customerIds": []}, 400, "invalid_audience"),
        ({"text": TEXT, "customerIds": "everyone"}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": "vip"}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": 7}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": "plan"}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": "active", "planId": plan_id}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": "active", "customerIds": ["c1"]}, 400, "invalid_audience"),
        ({"text": TEXT, "audience": "plan", "planId": 999}, 404, "plan_not_found"),
        ({"text": TEXT, "startAt": "tomorrow"}, 400, "invalid_schedule"),
        ({"text": TEXT, "startAt": "2026-12-01T10:00:00Z", "draft": True}, 400, "invalid_schedule"),
        ({"text": TEXT, "startAt": "2999-01-01T00:00:00Z"}, 400, "invalid_schedule"),
        ({"text": TEXT, "draft": "yes"}, 400, "invalid_schedule"),
        ({"text": TEXT, "customerIds": ["nobody"]}, 422, "empty_audience"),
        ({"text": TEXT, "audience": "active"}, 422, "empty_audience"),  # started now, nobody holds a period
    ]:
        assert_problem(post(web, headers, body), status, code)
    unreasoned = session_of(web, name="bob")
    assert_problem(post(web, unreasoned, {"text": TEXT}), 400, "reason_required")
    preview = f"{web}/v1/panel/campaigns/preview"
    assert_problem(requests.post(preview, headers=headers, json={"audience": "vip"}, timeout=10), 400,
                   "invalid_audience")  # fmt: skip
    assert_problem(requests.get(f"{web}/v1/panel/campaigns/77", headers=headers, timeout=10), 404,
                   "campaign_not_found")  # fmt: skip
    assert_problem(requests.get(f"{web}/v1/panel/campaigns/x1", headers=headers, timeout=10), 400,
                   "invalid_campaign_id")  # fmt: skip
    for action in ("start", "pause", "resume"):
        assert_problem(change(web, headers, 77, action), 404, "campaign_not_found")
        assert_problem(change(web, headers, "x1", action), 400, "invalid_campaign_id")
    assert Campaign.select().count() == 0 and CampaignRecipient.select().count() == 0
    assert AuditEvent.select().where(AuditEvent.action.startswith("campaign.")).count() == 0

    sending = post(web, headers, {"text": TEXT}).json()["campaign"]
    assert_problem(change(web, headers, sending["id"], "start"), 409, "campaign_state_conflict")
    assert_problem(change(web, headers, sending["id"], "resume"), 409, "campaign_state_conflict")
    assert_problem(change(web, unreasoned, sending["id"], "pause"), 400, "reason_required")
    assert show(web, headers, sending["id"])["status"] == "sending"
    assert AuditEvent.select().where(AuditEvent.action.startswith("campaign.")).count() == 1
