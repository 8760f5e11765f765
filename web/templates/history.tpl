% rebase("layout", title="Operation " + str(op.id), operator=operator, here="/panel/system/operations")
<h1>Operation {{op.id}} <span class="muted">· {{op.operation}} · <span class="status-{{op.status}}">{{op.status}}</span></span></h1>
<p class="muted">entitlement {{op.entitlement_id}} · idempotency key <span class="code">{{!linked(op.idempotency_key)}}</span> · correlation <span class="code">{{!linked(op.correlation_id)}}</span></p>
% if op.last_error_code:
<div class="panel-box">{{!explained(op.last_error_code)}}</div>
% end
<table id="history">
  <tr><th>attempt</th><th>status</th><th>error</th><th>correlation</th><th>at</th></tr>
  % for row in history:
  <tr><td>{{row.attempt}}</td><td class="status-{{row.status}}">{{row.status}}</td><td>{{!explained(row.error_code)}}</td><td class="code muted">{{!linked(row.correlation_id)}}</td><td class="muted">{{iso(row.created_at)}}</td></tr>
  % end
</table>
<p><a href="/panel/system/operations">← all operations</a></p>
