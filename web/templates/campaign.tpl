% rebase("layout", title="Campaign " + str(campaign.id), operator=operator, here="/panel/campaigns")
<h1>Campaign {{campaign.id}} <span class="muted">· {{campaign.kind}} · <span class="status-{{campaign.status}}" id="campaign-status">{{campaign.status}}</span></span></h1>
<p class="muted">queued by <span class="code">{{campaign.created_by}}</span> at {{iso(campaign.created_at)}} · done {{iso(campaign.finished_at) or "–"}} · <a href="/panel/campaigns">all campaigns</a></p>
<div class="figures" id="delivery">
  % for status, label in (("sent", "sent"), ("failed", "failed"), ("unreachable", "unreachable"), ("pending", "waiting"), ("sending", "being sent")):
  <div class="panel-box"><div class="muted">{{label}}</div><div class="figure" id="count-{{status}}">{{counts[status]}}</div></div>
  % end
</div>
<p class="muted">{{campaign.recipients}} recipients.
% if campaign.status == "sending":
The bot is still sending it; this page shows the counts as of now.
% end
</p>
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
