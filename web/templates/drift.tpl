% rebase("layout", title="Drift", operator=operator, here="/panel/system/drift")
<h1>Open drift</h1>
% if missing_open:
<p id="missing-open" class="notice">{{missing_open}} user(s) missing on the panel: reconcile recreates them.</p>
% end
% if not rows:
<div class="empty">No open drift among the entitlements reconcile has checked (each live one every 15 minutes, 500 per run).</div>
% else:
<table id="drift">
  <tr><th>entitlement</th><th>kind</th><th>expected</th><th>observed</th><th>detected</th></tr>
  % for row in rows:
  <tr><td>{{row["entitlement_id"]}}</td><td>{{row["kind"]}}</td><td class="code">{{row["expected"]}}</td><td class="code">{{row["observed"]}}</td><td class="muted">{{iso(row["detected_at"])}}</td></tr>
  % end
</table>
% end
<h2>Repaired in the last {{repaired_days}} days</h2>
% if missing_repaired:
<p id="missing-repaired" class="notice">{{missing_repaired}} user(s) were missing on the panel and were recreated by reconcile: a panel restored from an old backup or wiped loses users.</p>
% end
% if not repaired:
<div class="empty">Nothing repaired.</div>
% else:
<table id="drift-repaired">
  <tr><th>entitlement</th><th>kind</th><th>expected</th><th>observed</th><th>detected</th><th>repaired</th></tr>
  % for row in repaired:
  <tr><td>{{row["entitlement_id"]}}</td><td>{{row["kind"]}}</td><td class="code">{{row["expected"]}}</td><td class="code">{{row["observed"]}}</td><td class="muted">{{iso(row["detected_at"])}}</td><td class="muted">{{iso(row["resolved_at"])}}</td></tr>
  % end
</table>
% end
