% rebase("layout", title="Subscription " + str(subscription.slot), operator=operator, here="/panel/customers")
% current = standing.entitlement
<h1>Subscription {{subscription.slot}} <span class="muted">· <span class="phase-{{standing.phase}}" id="phase">{{standing.phase}}</span></span></h1>
<p class="muted">
  customer <a href="{{customer_page(subscription.customer_id)}}">{{subscription.customer_id}}</a>
  · panel username <span class="code">{{subscription.remote_username or "–"}}</span>
  · auto-renew {{"on" if subscription.auto_renew else "off"}}
  · id <span class="code">{{subscription.id}}</span>
</p>
% if current:
<div class="panel-box" id="current">
  <strong>{{plans[current.plan_id].name if current.plan_id in plans else "Plan " + str(current.plan_id)}}</strong>
  · from {{iso(current.starts_at)}} to {{iso(current.ends_at)}}
  % if current.grace_period_hours:
  (grace until {{iso(grace_end(current))}})
  % end
  · traffic {{traffic(current.traffic_allowance_bytes)}} · devices {{devices(current.device_limit)}}
  % if current.paused_at:
  · paused since {{iso(current.paused_at)}}
  % end
  · order <a href="{{order_page(current.order_id)}}">{{current.order_id}}</a>
</div>
% end
% if standing.phase == "failed":
<div class="notice" id="without-access">Paid, and the customer has no access: provisioning this period failed or was cancelled. Re-provision queues a new {{"create" if current.status == "pending" else "reconcile"}} from the period's entitlement.</div>
% end
% if can_reprovision:
<form class="inline operator-change panel-box" id="reprovision">
  <input name="reason" placeholder="reason" required size="30" aria-label="reason for the re-provision">
  <button type="submit" data-action="{{subscription_action(subscription, 'reprovision')}}" data-body='{"requestId": "{{request_id}}"}'>Re-provision</button>
  <span class="error" style="color:var(--bad)"></span>
</form>
% end
% if can_change:
<form class="inline operator-change panel-box" id="pause-resume">
  <input name="reason" placeholder="reason" required size="30" aria-label="reason for the change">
  % if current and current.paused_at:
  <button type="submit" data-action="{{subscription_action(subscription, 'resume')}}" data-body='{"requestId": "{{request_id}}"}'>Resume</button>
  % else:
  <button type="submit" class="danger" data-action="{{subscription_action(subscription, 'pause')}}" data-body='{"requestId": "{{request_id}}"}'>Pause</button>
  % end
  <span class="error" style="color:var(--bad)"></span>
</form>
% end

<h2>Periods</h2>
<table id="entitlements">
  <tr><th>entitlement</th><th>order</th><th>status</th><th>from</th><th>to</th><th>traffic</th><th>devices</th><th>paused</th></tr>
  % for entitlement in entitlements:
  <tr>
    <td>{{entitlement.id}}</td>
    <td><a href="{{order_page(entitlement.order_id)}}">{{entitlement.order_id}}</a></td>
    <td class="status-{{entitlement.status}}">{{entitlement.status}}</td>
    <td class="muted">{{iso(entitlement.starts_at)}}</td>
    <td class="muted">{{iso(entitlement.ends_at)}}</td>
    <td>{{traffic(entitlement.traffic_allowance_bytes)}}</td>
    <td>{{devices(entitlement.device_limit)}}</td>
    <td class="muted">{{iso(entitlement.paused_at)}}</td>
  </tr>
  % end
</table>

<h2>Operations <span class="muted">(scheduled reconciles that succeeded left out)</span></h2>
% include("operation_rows", operations=operations)
