% rebase("layout", title="Outbox", operator=operator, here="/panel/system/outbox")
<h1>Outbox <span class="muted">· {{len(rows)}} pending</span></h1>
% if not rows:
<div class="empty">Nothing waiting to be published.</div>
% else:
<table id="outbox">
  <tr><th>topic</th><th>age</th></tr>
  % for topic, age in rows:
  <tr><td>{{topic}}</td><td>{{age}}</td></tr>
  % end
</table>
% end
