% rebase("layout", title="Payments", operator=operator, here="/panel/payments")
% from commerce.customers import shown_name
<h1>Payments</h1>
% include("list_filters", name="payments", status_word=words.payment_status)
% if not rows and not error:
<div class="empty">No payment matches these filters.</div>
% elif rows:
<div class="table-scroll">
<table id="payments">
  <tr><th>payment</th><th>created</th><th>order</th><th>customer</th><th>provider</th><th>provider's id</th><th>status</th><th>amount</th></tr>
  % for intent in rows:
  <tr data-payment="{{intent.id}}">
    <td><a href="{{payment_page(intent.id)}}">{{intent.id}}</a></td>
    <td class="muted">{{iso(intent.created_at)}}</td>
    <td><a href="{{order_page(intent.order_id)}}">{{intent.order_id}}</a> <span class="muted">{{words.order_kind(intent.order.operation)}}</span></td>
    <td><a href="{{customer_page(intent.order.customer_id)}}">{{shown_name(intent.order.customer.display_name) or intent.order.customer_id}}</a></td>
    <td data-provider="{{intent.provider}}">{{words.provider_name(intent.provider)}}</td>
    <td class="code">{{intent.provider_payment_id or "–"}}</td>
    <td class="status-{{intent.status}}" data-status="{{intent.status}}">{{words.payment_status(intent.status)}}</td>
    <td>{{money(intent.amount_minor, intent.currency)}}</td>
  </tr>
  % end
</table>
</div>
% end
% if next_link:
<p><a href="{{next_link}}" id="older">Older →</a></p>
% end
