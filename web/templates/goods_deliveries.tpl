% rebase("layout", title="Goods deliveries", operator=operator, here="/panel/goods")
<h1>Goods deliveries needing review</h1>
<p class="muted">The provider may or may not have sold these: its answer was lost or unclear, or a worker stopped while it asked. They are never sent to the provider again. Check each order at the provider, then mark it delivered or refund it to the customer's wallet.</p>
% if not rows:
<div class="empty">Nothing needs review.</div>
% else:
<table id="goods-deliveries">
  <tr><th>delivery</th><th>order</th><th>customer</th><th>goods</th><th>attempts</th><th>why</th><th>since</th>{{!"<th>resolve</th>" if can_resolve else ""}}</tr>
  % for row in rows:
  <tr data-delivery="{{row.id}}">
    <td>{{row.id}}</td>
    <td><a href="{{order_page(row.order_id)}}">{{row.order_id}}</a></td>
    <td><a href="{{customer_page(row.customer_id)}}" class="code">{{row.customer_id[:8]}}</a></td>
    <td>{{names.get(row.goods_id, row.goods_id)}}</td>
    <td>{{row.attempt_count}}</td>
    <td class="code" title="{{row.failure_class or ''}}">{{row.failure_class}}: {{row.last_error_code}}</td>
    <td class="muted">{{iso(row.updated_at)}}</td>
    % if can_resolve:
    <td>
      <form class="inline operator-change" id="resolve-{{row.id}}">
        <input name="reason" placeholder="reason" required size="24" aria-label="reason for delivery {{row.id}}">
        <button type="submit" data-action="/v1/panel/goods/deliveries/{{row.id}}/resolve" data-body='{"outcome": "delivered"}'>Delivered</button>
        <button type="submit" class="danger" data-action="/v1/panel/goods/deliveries/{{row.id}}/resolve" data-body='{"outcome": "refund"}'>Refund</button>
        <span class="error" style="color:var(--bad)"></span>
      </form>
    </td>
    % end
  </tr>
  % end
</table>
% end
