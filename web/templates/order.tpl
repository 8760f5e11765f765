% rebase("layout", title="Order " + str(order.id), operator=operator, here="/panel/customers")
<h1>Order {{order.id}} <span class="muted">· <span id="order-kind" data-kind="{{order.operation}}" title="{{order.operation}}">{{words.order_kind(order.operation)}}</span> · <span class="status-{{order.status}}" id="order-status" data-status="{{order.status}}" title="{{order.status}}">{{words.order_status(order.status)}}</span></span></h1>
<p class="muted">
  customer <a href="{{customer_page(order.customer_id)}}">{{order.customer_id}}</a>
  % if order.subscription_id:
  · subscription <a href="{{subscription_page(order.subscription_id)}}">{{order.subscription_id}}</a>
  % end
  · {{money(order.amount_minor, order.currency)}}
  % if order.refunded_amount_minor:
  · refunded <span id="refunded">{{money(order.refunded_amount_minor, order.currency)}}</span>
  % end
  · <span id="settled" data-settled-by="{{order.settled_by or ''}}" data-provider="{{order.provider or ''}}" title="{{order.settled_by or 'not settled'}}">{{words.settled(order)}}</span>
</p>
<p class="muted">created {{iso(order.created_at)}} · paid {{iso(order.paid_at) or "–"}} · fulfilled {{iso(order.fulfilled_at) or "–"}} · refunded {{iso(order.refunded_at) or "–"}}</p>
% if can_refund:
<form class="inline operator-change panel-box" id="refund" data-places="{{places}}">
  <input name="amount" placeholder="all: {{money(left, order.currency)}}" size="18" aria-label="amount to refund, in {{order.currency}}">
  <select name="to" data-field="to" aria-label="where the refund goes">
    % for index, (value, label) in enumerate(refund_choices):
    <option value="{{value}}"{{!" selected" if index == 0 else ""}}>{{label}}</option>
    % end
  </select>
  <input name="reason" placeholder="reason" required size="30" aria-label="reason for the refund">
  <button type="submit" class="danger" data-action="/v1/panel/orders/{{order.id}}/refund" data-body='{}'>Refund</button>
  <span class="error" style="color:var(--bad)"></span>
  <span class="muted" id="refund-effect">{{refund_effect}}</span>
</form>
% end

<h2>Payments</h2>
% if not intents:
<div class="empty">No payment at a provider (paid from the wallet, a code or a gift, or not paid).</div>
% else:
<table id="payments">
  <tr><th>payment</th><th>provider</th><th>provider's id</th><th>status</th><th>amount</th><th>created</th></tr>
  % for intent in intents:
  <tr>
    <td><a href="{{payment_page(intent.id)}}">{{intent.id}}</a></td>
    <td data-provider="{{intent.provider}}">{{words.provider_name(intent.provider)}}</td>
    <td class="code">{{intent.provider_payment_id or "–"}}</td>
    <td class="status-{{intent.status}}" data-status="{{intent.status}}" title="{{intent.status}}">{{words.payment_status(intent.status)}}</td>
    <td>{{money(intent.amount_minor, intent.currency)}}</td>
    <td class="muted">{{iso(intent.created_at)}}</td>
  </tr>
  % end
</table>
% end

<h2>Refunds</h2>
% if not refunds:
<div class="empty">Not refunded.</div>
% else:
<table id="refunds">
  <tr><th>refund</th><th>amount</th><th>to</th><th>status</th><th>provider's id</th><th>last error</th><th>asked</th><th>done</th></tr>
  % for refund in refunds:
  <tr>
    <td>{{refund.id}}</td>
    <td>{{money(refund.amount_minor, refund.currency)}}</td>
    <td data-destination="{{refund.destination}}" data-provider="{{refund.provider or ''}}" title="{{refund.destination}}{{" (" + refund.provider + ")" if refund.provider else ""}}">{{words.destination(refund)}}</td>
    <td class="status-{{refund.status}}" data-status="{{refund.status}}" title="{{refund.status}}">{{words.refund_status(refund.status)}}</td>
    <td class="code">{{refund.provider_refund_id or "–"}}</td>
    <td>{{!explained(refund.last_error_code) or "–"}}</td>
    <td class="muted">{{iso(refund.created_at)}}</td>
    <td class="muted">{{iso(refund.completed_at) or "–"}}</td>
  </tr>
  % end
</table>
% end

<h2>Ledger</h2>
% if not transactions:
<div class="empty">No money moved for this order in the ledger.</div>
% else:
<table id="ledger">
  <tr><th>transaction</th><th>kind</th><th>entries</th><th>when</th></tr>
  % for transaction, entries in transactions:
  <tr>
    <td>{{transaction.id}}{{" (reverses " + str(transaction.reverses_id) + ")" if transaction.reverses_id else ""}}</td>
    <td data-kind="{{transaction.kind}}" title="{{transaction.kind}}">{{words.ledger_kind(transaction.kind)}}</td>
    <td>
      % for entry in entries:
      <span class="code">{{entry.account.name}}</span> {{money(entry.amount_minor, entry.currency)}}<br>
      % end
    </td>
    <td class="muted">{{iso(transaction.created_at)}}</td>
  </tr>
  % end
</table>
% end

<h2>Fulfillment operations</h2>
% include("operation_rows", operations=operations)
