% rebase("layout", title="Bulk action " + str(action.id), operator=operator, here="/panel/bulk-actions")
<h1>Bulk action {{action.id}} <span class="muted">· {{action.action}} · <span class="status-{{action.status}}" id="bulk-status">{{action.status}}</span></span></h1>
<p class="muted">
  % if action.action == "extend":
  Extends every active subscription{{" of " + plan.name if plan else ""}} by {{action.days}} days.
  % elif action.action == "set_squads":
  Gives every active subscriber of {{plan.name if plan else "the plan"}} {{len(action.squads or [])}} squads.
  % else:
  {{action.action.capitalize()}}s the subscriptions listed.
  % end
  Previewed by <span class="code">{{action.created_by}}</span> at {{iso(action.created_at)}}
  % if action.confirmed_by:
  · confirmed by <span class="code">{{action.confirmed_by}}</span> at {{iso(action.confirmed_at)}}: “{{action.reason}}”
  % end
  · done {{iso(action.finished_at) or "–"}} · <a href="/panel/bulk-actions">all bulk actions</a>
</p>
<div class="figures" id="progress">
  <div class="panel-box"><div class="muted">items</div><div class="figure" id="count-items">{{action.item_count}}</div></div>
  % for status, label in (("applied", "applied"), ("skipped", "skipped"), ("pending", "waiting"), ("cancelled", "cancelled")):
  <div class="panel-box"><div class="muted">{{label}}</div><div class="figure" id="count-{{status}}">{{progress["items"][status]}}</div></div>
  % end
  <div class="panel-box"><div class="muted">at the panel</div><div class="figure" id="count-succeeded">{{progress["operations"]["succeeded"]}}</div></div>
</div>
% if action.status == "previewed":
<p>Nothing has changed yet: confirming applies the change to these {{action.item_count}} subscriptions, 50 every 15 seconds.</p>
% end
% if offered:
<form class="operator-change inline" id="bulk-change" style="display:flex;gap:6px;align-items:center">
  <input name="reason" placeholder="reason" required size="40" aria-label="reason">
  % for verb, label in offered:
  <button type="submit" data-action="/v1/panel/bulk-actions/{{action.id}}/{{verb}}">{{label}}</button>
  % end
  <span class="error" style="color:var(--bad)"></span>
</form>
% end
<h2>Items</h2>
<table id="items">
  <tr><th>#</th><th>subscription</th><th>customer</th><th>status</th><th>operation</th><th>why skipped</th><th>applied</th></tr>
  % for item in items:
  <tr data-position="{{item['position']}}">
    <td>{{item["position"]}}</td>
    <td class="code"><a href="{{subscription_page(item['subscription_id'])}}">{{item["subscription_id"]}}</a></td>
    <td class="code"><a href="{{customer_page(item['customer_id'])}}">{{item["customer_id"]}}</a></td>
    <td class="status-{{item['status']}}">{{item["status"]}}</td>
    <td>
      % if item["operation_id"]:
      <a href="{{operation_page(item['operation_id'])}}">{{item["operation_id"]}}</a> <span class="status-{{item['operation_status']}}">{{item["operation_status"]}}</span>
      % else:
      –
      % end
    </td>
    <td><span class="code">{{item["error_code"] or "–"}}</span></td>
    <td class="muted">{{iso(item["applied_at"]) or "–"}}</td>
  </tr>
  % end
</table>
% if next_cursor:
<p><a href="?cursor={{next_cursor}}">Next items →</a></p>
% end
