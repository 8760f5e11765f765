% rebase("layout", title="Operations", operator=operator, here="/panel/system/operations")
<h1>Fulfillment operations</h1>
<form class="filters" method="get">
  <label>Status
    <select name="status">
      % for value in statuses:
      <option value="{{value}}" {{'selected' if value == status else ''}}>{{value}}</option>
      % end
    </select>
  </label>
  <label>Operation
    <select name="operation">
      <option value="">any</option>
      % for value in operations:
      <option value="{{value}}" {{'selected' if value == operation else ''}}>{{value}}</option>
      % end
    </select>
  </label>
  <label>Entitlement <input name="entitlementId" value="{{entitlement_id or ''}}" size="8"></label>
  <button type="submit">Show</button>
</form>
% if not rows:
<div class="empty">No {{status}} operations.</div>
% else:
<table id="operations">
  <tr><th>id</th><th>created</th><th>operation</th><th>entitlement</th><th>status</th><th>attempts</th><th>error</th><th>correlation</th><th></th></tr>
  % for op in rows:
  <tr data-operation="{{op.id}}">
    <td><a href="/panel/system/operations/{{op.id}}">{{op.id}}</a></td>
    <td class="muted">{{iso(op.created_at)}}</td>
    <td>{{op.operation}}</td>
    <td>{{op.entitlement_id}}</td>
    <td class="status-{{op.status}}">{{op.status}}</td>
    <td>{{op.attempt_count}}</td>
    <td>{{!explained(op.last_error_code)}}</td>
    <td class="code muted">{{!linked(op.correlation_id)}}</td>
    <td>
      % if can_write and op.status != "succeeded":
      <form class="inline operator-change">
        <input name="reason" placeholder="reason" required size="16" aria-label="reason for operation {{op.id}}">
        <button type="submit" data-action="/v1/panel/system/jobs/{{op.id}}/retry">Retry</button>
        <button type="submit" class="danger" data-action="/v1/panel/system/jobs/{{op.id}}/cancel">Cancel</button>
        <span class="error" style="color:var(--bad)"></span>
      </form>
      % end
    </td>
  </tr>
  % end
</table>
% end
% if next_cursor:
<p><a href="?status={{status}}&operation={{operation or ''}}&entitlementId={{entitlement_id or ''}}&cursor={{next_cursor}}">Older →</a></p>
% end
