% rebase("layout", title="Drift", operator=operator, here="/panel/system/drift")
<h1>Open drift</h1>
% if not rows:
<div class="empty">No open drift: every checked entitlement matches the panel.</div>
% else:
<table id="drift">
  <tr><th>entitlement</th><th>kind</th><th>expected</th><th>observed</th><th>detected</th></tr>
  % for row in rows:
  <tr><td>{{row["entitlement_id"]}}</td><td>{{row["kind"]}}</td><td class="code">{{row["expected"]}}</td><td class="code">{{row["observed"]}}</td><td class="muted">{{iso(row["detected_at"])}}</td></tr>
  % end
</table>
% end
