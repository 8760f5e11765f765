% rebase("layout", title="Orders", operator=operator, here="/panel/orders")
% from commerce.customers import shown_name
<h1>Orders</h1>
% include("list_filters", name="orders", status_word=words.order_status)
% if not rows and not error:
<div class="empty">No order matches these filters.</div>
% elif rows:
<div class="table-scroll">
<table id="orders">
  <tr><th>order</th><th>created</th><th>customer</th><th>kind</th><th>status</th><th>amount</th><th>provider</th></tr>
  % for order in rows:
  <tr data-order="{{order.id}}">
    <td><a href="{{order_page(order.id)}}">{{order.id}}</a></td>
    <td class="muted">{{iso(order.created_at)}}</td>
    <td><a href="{{customer_page(order.customer_id)}}">{{shown_name(order.customer.display_name) or order.customer_id}}</a></td>
    <td data-kind="{{order.operation}}">{{words.order_kind(order.operation)}}</td>
    <td class="status-{{order.status}}" data-status="{{order.status}}">{{words.order_status(order.status)}}</td>
    <td>{{money(order.amount_minor, order.currency)}}</td>
    <td data-provider="{{order.provider or ''}}">{{words.provider_name(order.provider) or "–"}}</td>
  </tr>
  % end
</table>
</div>
% end
% if next_link:
<p><a href="{{next_link}}" id="older">Older →</a></p>
% end
