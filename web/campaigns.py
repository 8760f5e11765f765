"""The panel API of campaigns and announcements (SPEC 6, 14.6): an operator queues one for the bot to send, and
follows its delivery.

POST /v1/panel/campaigns {kind, text, customerIds?}   queue it (campaigns.write, X-Operator-Reason, audited)
GET  /v1/panel/campaigns/{id}                         the campaign and its recipients per status (campaigns.write)

Following a campaign needs the same permission as sending one: the counts
are the sender's feedback, and nothing else reads them yet.
"""

import bottle

from models.campaigns import Campaign
from ops import campaigns, operators
from web import panel, problems
from web.answers import id_param, iso, json_answer, json_body
from web.problems import Problem

REJECTED_STATUS = {campaigns.EMPTY_AUDIENCE: 422}


def campaign_json(campaign):
    return {
        "id": campaign.id,
        "kind": campaign.kind,
        "status": campaign.status,
        "recipients": campaign.recipients,
        "createdBy": campaign.created_by,
        "createdAt": iso(campaign.created_at),
        "finishedAt": iso(campaign.finished_at),
        "delivery": campaigns.progress(campaign.id),
    }


def build():
    app = bottle.Bottle()

    @app.post("/v1/panel/campaigns")
    @panel.signed_in(operators.CAMPAIGNS_WRITE)
    def create(operator):
        reason = panel.operator_reason()
        body = json_body()
        try:
            campaign = campaigns.create_campaign(
                body.get("kind", "campaign"),
                body.get("text"),
                f"operator:{operator.username}",
                reason,
                customer_ids=body.get("customerIds"),
            )
        except campaigns.CampaignRejected as rejected:
            raise Problem(REJECTED_STATUS.get(rejected.code, 400), rejected.code, rejected.detail) from None
        return json_answer(201, {"campaign": campaign_json(campaign)})

    @app.get("/v1/panel/campaigns/<campaign_id>")
    @panel.signed_in(operators.CAMPAIGNS_WRITE)
    def show(operator, campaign_id):
        campaign_id = id_param(campaign_id, problems.INVALID_CAMPAIGN_ID, "a campaign id")
        campaign = Campaign.get_or_none(Campaign.id == campaign_id)
        if campaign is None:
            raise Problem(404, campaigns.CAMPAIGN_NOT_FOUND, f"campaign {campaign_id} does not exist")
        return json_answer(200, {"campaign": campaign_json(campaign)})

    return app
