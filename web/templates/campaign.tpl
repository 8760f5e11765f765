% rebase("layout", title="Campaign " + str(campaign.id), operator=operator, here="/panel/campaigns")
<h1>Campaign {{campaign.id}} <span class="muted">· {{campaign.kind}} · <span class="status-{{campaign.status}}" id="campaign-status">{{campaign.status}}</span></span></h1>
<p class="muted">queued by <span class="code">{{campaign.created_by}}</span> at {{iso(campaign.created_at)}} · audience <span class="code" id="campaign-audience">{{campaign.audience}}{{f" (plan {campaign.plan_id})" if campaign.plan_id else ""}}</span> · starts {{iso(campaign.start_at) or "when started"}} · done {{iso(campaign.finished_at) or "–"}} · <a href="/panel/campaigns">all campaigns</a></p>
<div class="figures" id="delivery">
  % for status, label in (("sent", "sent"), ("failed", "failed"), ("unreachable", "unreachable"), ("pending", "waiting"), ("sending", "being sent")):
  <div class="panel-box"><div class="muted">{{label}}</div><div class="figure" id="count-{{status}}">{{counts[status]}}</div></div>
  % end
  <div class="panel-box"><div class="muted">left out: blocked</div><div class="figure" id="left-out-blocked">{{campaign.left_out_blocked}}</div></div>
  <div class="panel-box"><div class="muted">left out: unreachable</div><div class="figure" id="left-out-unreachable">{{campaign.left_out_unreachable}}</div></div>
</div>
<p class="muted">{{campaign.recipients}} recipients{{"" if campaign.expanded_at else " so far: the worker is still writing them"}}.
% if campaign.status == "sending":
The bot is still sending it; this page shows the counts as of now.
% elif campaign.status == "paused":
Paused: the bot sends none of it until it is resumed.
% end
Left out: customers an operator blocked (a campaign only) and customers who blocked the bot.
</p>
% actions = [(name, label) for name, label, allowed in (("start", "Start now", ("draft", "scheduled")), ("pause", "Pause", ("scheduled", "sending")), ("resume", "Resume", ("paused",))) if campaign.status in allowed]
% if actions:
<form class="inline operator-change panel-box" id="campaign-actions" style="display:flex;gap:6px;align-items:center">
  <input name="reason" placeholder="reason" required size="40" aria-label="reason">
  % for name, label in actions:
  <button type="submit" data-action="/v1/panel/campaigns/{{campaign.id}}/{{name}}">{{label}}</button>
  % end
  <span class="error" style="color:var(--bad)"></span>
</form>
% end
<h2>Text</h2>
<div class="message"><p class="text" id="campaign-text">{{campaign.text}}</p></div>

<h2>Not reached</h2>
% if not missed:
<div class="empty">Nobody so far: every recipient tried was reached.</div>
% else:
<table id="missed">
  <tr><th>customer</th><th>status</th><th>attempts</th><th>why</th></tr>
  % for recipient in missed:
  <tr data-customer="{{recipient.customer_id}}">
    <td class="code"><a href="{{customer_page(recipient.customer_id)}}">{{recipient.customer_id}}</a></td>
    <td class="status-{{recipient.status}}">{{recipient.status}}</td>
    <td>{{recipient.attempts}}</td>
    <td><span class="code">{{recipient.error_code or "–"}}</span><div class="explain">{{recipient_error(recipient.error_code)}}</div></td>
  </tr>
  % end
</table>
% if len(missed) == missed_rows:
<p class="muted">The first {{missed_rows}} shown.</p>
% end
% end
