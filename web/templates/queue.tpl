% rebase("layout", title="Queue", operator=operator, here="/panel/system/queue")
<h1>Queue</h1>
<div id="maintenance" style="margin-bottom:16px; padding:10px 12px; background:#fff; border:1px solid var(--line); border-radius:6px">
  % if maintenance.active:
  <strong style="color:var(--bad)">Maintenance mode is on</strong> <span class="muted">since {{iso(maintenance.since)}} · {{maintenance.reason or ''}} · set by {{maintenance.set_by or ''}}</span>
  % else:
  <strong>Maintenance mode is off</strong> <span class="muted">fulfillment runs; purchases are accepted</span>
  % end
  % if can_write:
  <form class="inline operator-change" style="margin-top:8px">
    <input name="reason" placeholder="reason" required size="30" aria-label="reason for the maintenance change">
    <button type="submit" class="{{'' if maintenance.active else 'danger'}}" data-action="/v1/panel/system/maintenance" data-body='{"active": {{'false' if maintenance.active else 'true'}}}'>Turn {{'off' if maintenance.active else 'on'}}</button>
    <span class="error" style="color:var(--bad)"></span>
  </form>
  % end
</div>
<table id="counts" style="max-width:640px">
  <tr><th>queue</th><th>state</th><th>jobs</th></tr>
  % for (queue, state), count in counts:
  <tr><td>{{queue}}</td><td class="status-{{state}}">{{state}}</td><td>{{count}}</td></tr>
  % end
</table>
<h2 style="font-size:16px; margin-top:24px">Completed and failed per minute, last hour</h2>
<svg id="chart" width="{{chart["width"]}}" height="{{chart["height"] + 20}}" role="img" aria-label="jobs per minute">
  % for bar in chart["bars"]:
  <rect x="{{bar["x"]}}" y="{{bar["y"]}}" width="{{bar["w"]}}" height="{{bar["h"]}}" fill="{{bar["fill"]}}"><title>{{bar["title"]}}</title></rect>
  % end
  <text x="0" y="{{chart["height"] + 15}}" font-size="11" fill="#667085">{{chart["start"]}}</text>
  <text x="{{chart["width"]}}" y="{{chart["height"] + 15}}" font-size="11" fill="#667085" text-anchor="end">{{chart["end"]}} · peak {{chart["peak"]}}/min · green completed, red failed</text>
</svg>
<h2 style="font-size:16px; margin-top:24px">Dead letters</h2>
% if not dead:
<div class="empty">No discarded or cancelled jobs.</div>
% else:
<table id="dead-letters">
  <tr><th>id</th><th>kind</th><th>queue</th><th>state</th><th>attempts</th><th>last error</th></tr>
  % for job in dead:
  <tr><td>{{job.id}}</td><td>{{job.kind}}</td><td>{{job.queue}}</td><td class="status-{{job.state}}">{{job.state}}</td><td>{{job.attempt}}/{{job.max_attempts}}</td><td class="code">{{job.last_error or ''}}</td></tr>
  % end
</table>
% end
