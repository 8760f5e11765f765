"""The panel API of campaigns and announcements (SPEC 6, 14.6, 15.5): an operator previews an audience, queues a
campaign for the bot to send (now, at a time, or as a draft), starts, pauses and resumes it, and follows its
delivery.

POST /v1/panel/campaigns                 queue it (campaigns.write, X-Operator-Reason, audited `campaign.created`):
                                         {kind, text, audience?, planId?, customerIds?, startAt?, draft?}
POST /v1/panel/campaigns/preview         how many customers the audience holds now, and how many are left out
                                         (campaigns.write; writes nothing): {kind?, audience?, planId?, customerIds?}
GET  /v1/panel/campaigns/{id}            the campaign and its recipients per status (campaigns.write)
POST /v1/panel/campaigns/{id}/start      a draft or scheduled one starts now (audited `campaign.started`)
POST /v1/panel/campaigns/{id}/pause      the bot sends no more of it (audited `campaign.paused`)
POST /v1/panel/campaigns/{id}/resume     it goes on (audited `campaign.resumed`)

Following a campaign needs the same permission as sending one: the counts
are the sender's feedback, and nothing else reads them yet. `startAt` is an
ISO 8601 time (UTC when it names no offset); a time already past starts the
campaign now.
"""

import datetime

import bottle

from models.campaigns import Campaign
from ops import campaigns, operators
from web import panel, problems
from web.answers import id_param, iso, json_answer, json_body
from web.problems import Problem

REJECTED_STATUS = {
    campaigns.EMPTY_AUDIENCE: 422,
    campaigns.PLAN_NOT_FOUND: 404,  # a body naming a missing plan: 404, as gift cards, access codes and checkout
    campaigns.CAMPAIGN_NOT_FOUND: 404,
    campaigns.CAMPAIGN_STATE_CONFLICT: 409,
}


def campaign_json(campaign):
    return {
        "id": campaign.id,
        "kind": campaign.kind,
        "status": campaign.status,
        "audience": campaign.audience,
        "planId": campaign.plan_id,
        "startAt": iso(campaign.start_at),
        "expandedAt": iso(campaign.expanded_at),
        "recipients": campaign.recipients,
        "leftOut": {"blocked": campaign.left_out_blocked, "unreachable": campaign.left_out_unreachable},
        "createdBy": campaign.created_by,
        "createdAt": iso(campaign.created_at),
        "finishedAt": iso(campaign.finished_at),
        "delivery": campaigns.progress(campaign.id),
    }


def _start_at(body):
    raw = body.get("startAt")
    if raw is None:
        return None
    try:
        start_at = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00")) if isinstance(raw, str) else None
    except ValueError:
        start_at = None
    if start_at is None:
        raise Problem(400, campaigns.INVALID_SCHEDULE, "startAt must be an ISO 8601 time")
    if start_at.tzinfo is not None:
        start_at = start_at.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return start_at


def _audience(body):
    """(audience name or None, planId, customerIds) of a request body."""
    name = body.get("audience")
    if name is not None and not isinstance(name, str):
        raise Problem(400, campaigns.INVALID_AUDIENCE, "audience must be a string")
    return name, body.get("planId"), body.get("customerIds")


def _rejected(rejected):
    return Problem(REJECTED_STATUS.get(rejected.code, 400), rejected.code, rejected.detail)


def build():
    app = bottle.Bottle()

    @app.post("/v1/panel/campaigns")
    @panel.signed_in(operators.CAMPAIGNS_WRITE)
    def create(operator):
        reason = panel.operator_reason()
        body = json_body()
        name, plan_id, customer_ids = _audience(body)
        draft = body.get("draft", False)
        if not isinstance(draft, bool):
            raise Problem(400, campaigns.INVALID_SCHEDULE, "draft must be true or false")
        try:
            campaign = campaigns.create_campaign(
                body.get("kind", "campaign"),
                body.get("text"),
                f"operator:{operator.username}",
                reason,
                customer_ids=customer_ids,
                audience_name=name,
                plan_id=plan_id,
                start_at=_start_at(body),
                draft=draft,
            )
        except campaigns.CampaignRejected as rejected:
            raise _rejected(rejected) from None
        return json_answer(201, {"campaign": campaign_json(campaign)})

    @app.post("/v1/panel/campaigns/preview")
    @panel.signed_in(operators.CAMPAIGNS_WRITE)
    def preview(operator):
        body = json_body()
        name, plan_id, customer_ids = _audience(body)
        try:
            counts = campaigns.preview(body.get("kind", "campaign"), name, plan_id, customer_ids)
        except campaigns.CampaignRejected as rejected:
            raise _rejected(rejected) from None
        return json_answer(200, {"preview": counts})

    @app.get("/v1/panel/campaigns/<campaign_id>")
    @panel.signed_in(operators.CAMPAIGNS_WRITE)
    def show(operator, campaign_id):
        campaign_id = id_param(campaign_id, problems.INVALID_CAMPAIGN_ID, "a campaign id")
        campaign = Campaign.get_or_none(Campaign.id == campaign_id)
        if campaign is None:
            raise Problem(404, campaigns.CAMPAIGN_NOT_FOUND, f"campaign {campaign_id} does not exist")
        return json_answer(200, {"campaign": campaign_json(campaign)})

    def change(action):
        @panel.signed_in(operators.CAMPAIGNS_WRITE)
        def route(operator, campaign_id):
            campaign_id = id_param(campaign_id, problems.INVALID_CAMPAIGN_ID, "a campaign id")
            reason = panel.operator_reason()
            try:
                campaign = action(campaign_id, f"operator:{operator.username}", reason)
            except campaigns.CampaignRejected as rejected:
                raise _rejected(rejected) from None
            return json_answer(200, {"campaign": campaign_json(campaign)})

        return route

    for name, action in (("start", campaigns.start), ("pause", campaigns.pause), ("resume", campaigns.resume)):
        app.post(f"/v1/panel/campaigns/<campaign_id>/{name}", callback=change(action))

    return app
