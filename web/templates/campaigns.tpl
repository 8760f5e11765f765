% rebase("layout", title="Campaigns", operator=operator, here="/panel/campaigns")
<h1>Campaigns</h1>
<form class="stacked operator-change panel-box" id="new-campaign">
  <strong>Queue a campaign or an announcement</strong>
  <label>Kind
    <select name="kind" data-field="kind" aria-label="kind">
      % for kind in kinds:
      <option value="{{kind}}">{{kind}}</option>
      % end
    </select>
  </label>
  <span class="muted">A campaign (marketing) leaves out customers an operator blocked; an announcement (service news) reaches them too. Neither reaches a customer who blocked the bot; both count whom they leave out.</span>
  <textarea name="text" data-field="text" rows="4" maxlength="{{max_text}}" required placeholder="the message, as the customers will read it in Telegram" aria-label="text"></textarea>
  <div class="inline" style="display:flex;gap:6px;align-items:center;flex-wrap:wrap">
    <label>Audience
      <select name="audience" data-field="audience" aria-label="audience">
        <option value="">all (or the customers listed below)</option>
        % for name, label in audiences:
        <option value="{{name}}">{{label}}</option>
        % end
      </select>
    </label>
    <label>Plan
      <select name="planId" data-field="planId" data-number aria-label="plan">
        <option value="">– (the audience “holders of a plan”)</option>
        % for plan in plans:
        <option value="{{plan.id}}">{{plan.name}} ({{plan.code}})</option>
        % end
      </select>
    </label>
    <label>Start at (UTC) <input name="startAt" data-field="startAt" type="datetime-local" aria-label="start at"></label>
  </div>
  <textarea name="customerIds" data-field="customerIds" data-list rows="2" placeholder="only these customer ids (spaces or commas between them), with no audience chosen" aria-label="customer ids"></textarea>
  <div class="inline" style="display:flex;gap:6px;align-items:center;flex-wrap:wrap">
    <input name="reason" placeholder="reason" required size="40" aria-label="reason for the campaign">
    <button type="submit" formnovalidate data-action="/v1/panel/campaigns/preview" data-show="preview">Preview the audience</button>
    <button type="submit" data-action="/v1/panel/campaigns">Queue it</button>
    <button type="submit" data-action="/v1/panel/campaigns" data-body='{"draft": true}'>Save as a draft</button>
    <span class="result" id="audience-preview"></span>
    <span class="error" style="color:var(--bad)"></span>
  </div>
  <span class="muted">Queued with no start time, it starts at once; with one, at that time. The worker writes its recipients within a minute of the start, and the bot sends them at the configured rate. A campaign can be paused and resumed from its page.</span>
</form>
% if not rows:
<div class="empty">No campaign yet.</div>
% else:
<table id="campaigns">
  <tr><th>campaign</th><th>kind</th><th>audience</th><th>status</th><th>starts</th><th>recipients</th><th>sent</th><th>failed</th><th>unreachable</th><th>left out</th><th>waiting</th><th>by</th><th>queued</th><th>done</th></tr>
  % for campaign in rows:
  % count = counts[campaign.id]
  <tr data-campaign="{{campaign.id}}">
    <td><a href="{{campaign_page(campaign.id)}}">{{campaign.id}}</a></td>
    <td>{{campaign.kind}}</td>
    <td>{{campaign.audience}}</td>
    <td class="status-{{campaign.status}}">{{campaign.status}}</td>
    <td class="muted">{{iso(campaign.start_at) or "–"}}</td>
    <td>{{campaign.recipients}}</td>
    <td>{{count["sent"]}}</td>
    <td class="{{'status-failed' if count['failed'] else ''}}">{{count["failed"]}}</td>
    <td>{{count["unreachable"]}}</td>
    <td>{{campaign.left_out_blocked + campaign.left_out_unreachable}}</td>
    <td>{{count["pending"] + count["sending"]}}</td>
    <td class="code">{{campaign.created_by}}</td>
    <td class="muted">{{iso(campaign.created_at)}}</td>
    <td class="muted">{{iso(campaign.finished_at) or "–"}}</td>
  </tr>
  % end
</table>
% end
% if next_cursor:
<p><a href="?cursor={{next_cursor}}">Older →</a></p>
% end
