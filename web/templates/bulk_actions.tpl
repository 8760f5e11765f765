% rebase("layout", title="Bulk actions", operator=operator, here="/panel/bulk-actions")
<h1>Bulk actions</h1>
% if can_change:
<form class="stacked operator-change panel-box" id="new-bulk-action">
  <strong>Preview a change to many subscriptions</strong>
  <span class="muted">The preview freezes the subscriptions it applies to and shows them with their count; nothing changes until it is confirmed, with a reason, on its page. Extend and set squads take the active subscriptions (of the plan chosen; extend without a plan: every one); pause and resume the subscriptions listed.</span>
  <label>Action
    <select name="action" data-field="action" aria-label="action">
      % for name in actions:
      <option value="{{name}}">{{name}}</option>
      % end
    </select>
  </label>
  <label>Plan
    <select name="planId" data-field="planId" data-number aria-label="plan">
      <option value="">every plan</option>
      % for plan in plans:
      <option value="{{plan.id}}">{{plan.name}} ({{plan.code}})</option>
      % end
    </select>
  </label>
  <label>Days (extend) <input name="days" data-field="days" data-number type="number" min="1" max="{{max_days}}" aria-label="days"></label>
  <textarea name="squadIds" data-field="squadIds" data-list rows="2" placeholder="set squads: the squad UUIDs every subscriber gets (spaces or commas between them)" aria-label="squad ids"></textarea>
  <textarea name="subscriptionIds" data-field="subscriptionIds" data-list rows="2" placeholder="pause or resume: the subscription ids (spaces or commas between them)" aria-label="subscription ids"></textarea>
  <div class="inline" style="display:flex;gap:6px;align-items:center">
    <button type="submit" data-action="/v1/panel/bulk-actions">Preview</button>
    <span class="error" style="color:var(--bad)"></span>
  </div>
</form>
% end
% if not rows:
<div class="empty">No bulk action yet.</div>
% else:
<table id="bulk-actions">
  <tr><th>action</th><th>what</th><th>status</th><th>items</th><th>applied</th><th>skipped</th><th>waiting</th><th>at the panel</th><th>by</th><th>previewed</th><th>done</th></tr>
  % for row in rows:
  % items = progress[row.id]["items"]
  <tr data-bulk-action="{{row.id}}">
    <td><a href="/panel/bulk-actions/{{row.id}}">{{row.id}}</a></td>
    <td>{{row.action}}{{" +%d days" % row.days if row.days else ""}}{{" plan %d" % row.plan_id if row.plan_id else ""}}</td>
    <td class="status-{{row.status}}">{{row.status}}</td>
    <td>{{row.item_count}}</td>
    <td>{{items["applied"]}}</td>
    <td>{{items["skipped"]}}</td>
    <td>{{items["pending"]}}</td>
    <td>{{progress[row.id]["operations"]["succeeded"]}}</td>
    <td class="code">{{row.confirmed_by or row.created_by}}</td>
    <td class="muted">{{iso(row.created_at)}}</td>
    <td class="muted">{{iso(row.finished_at) or "–"}}</td>
  </tr>
  % end
</table>
% end
% if next_cursor:
<p><a href="?cursor={{next_cursor}}">Older →</a></p>
% end
