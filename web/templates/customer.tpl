% from commerce.customers import shown_name
% rebase("layout", title="Customer " + shown_name(customer.display_name), operator=operator, here="/panel/customers")
<h1>{{shown_name(customer.display_name) or "Customer"}} <span class="muted">· {{customer.id}}</span></h1>
<p class="muted" id="identity">
  Telegram id {{customer.telegram_id or "–"}}
  · {{"@" + customer.telegram_username if customer.telegram_username else "no username"}}
  · language {{customer.language_code or "–"}}
  · since {{iso(customer.created_at)}}
  % if customer.blocked:
  · <strong style="color:var(--bad)">blocked</strong> {{customer.blocked_reason or ""}}
  % end
</p>

<h2>Subscriptions</h2>
% if not subscriptions:
<div class="empty">No subscriptions.</div>
% else:
<table id="subscriptions">
  <tr><th>slot</th><th>panel username</th><th>phase</th><th>plan</th><th>ends</th><th>traffic</th><th>devices</th><th>auto-renew</th></tr>
  % for subscription, standing in subscriptions:
  % current = standing.entitlement
  <tr data-subscription="{{subscription.id}}">
    <td><a href="{{subscription_page(subscription.id)}}">{{subscription.slot}}</a></td>
    <td class="code">{{subscription.remote_username or "–"}}</td>
    <td class="phase-{{standing.phase}}">{{standing.phase}}</td>
    <td>{{plans[current.plan_id].name if current and current.plan_id in plans else "–"}}</td>
    <td class="muted">{{iso(current.ends_at) if current else ""}}</td>
    <td>{{traffic(current.traffic_allowance_bytes) if current else ""}}</td>
    <td>{{devices(current.device_limit) if current else ""}}</td>
    <td>{{"on" if subscription.auto_renew else "off"}}</td>
  </tr>
  % end
</table>
% end

<h2>Timeline</h2>
% if not timeline:
<div class="empty">Nothing has happened yet.</div>
% else:
<div class="table-scroll" style="overflow-x:auto; max-width:100%"><table id="timeline">
  <tr><th>when</th><th>what</th><th>status</th></tr>
  % for entry in timeline:
  <tr data-timeline="{{entry.kind}}">
    <td class="muted">{{iso(entry.at)}}</td>
    <td>
      % if entry.href:
      <a href="{{entry.href}}">{{entry.text}}</a>
      % else:
      {{entry.text}}
      % end
    </td>
    <td class="status-{{entry.status}}" data-status="{{entry.status}}" title="{{entry.status}}">{{entry.shown}}</td>
  </tr>
  % end
</table></div>
% if len(timeline) == timeline_rows:
<p class="muted">The newest {{timeline_rows}} entries; the sections below page through every order, payment and ticket.</p>
% end
% end

<h2>Support tickets</h2>
% if tickets is None:
<p class="muted">Support tickets need the support.read permission.</p>
% elif not tickets:
<div class="empty">No support ticket.</div>
% else:
<table id="tickets">
  <tr><th>ticket</th><th>status</th><th>opened</th><th>last activity</th></tr>
  % for ticket in tickets:
  <tr data-ticket="{{ticket.id}}">
    <td><a href="{{ticket_page(ticket.id)}}">{{ticket.id}}</a></td>
    <td class="status-{{ticket.status}}">{{ticket.status}}</td>
    <td class="muted">{{iso(ticket.created_at)}}</td>
    <td class="muted">{{iso(ticket.updated_at)}}</td>
  </tr>
  % end
</table>
% end

% if sections is None:
<p class="muted">Orders, payments and the wallet need the payments.read permission.</p>
% else:
<h2>Orders</h2>
% if not sections["orders"]:
<div class="empty">No orders.</div>
% else:
<table id="orders">
  <tr><th>order</th><th>kind</th><th>status</th><th>amount</th><th>refunded</th><th>paid by</th><th>created</th><th>operations</th></tr>
  % for order in sections["orders"]:
  <tr data-order="{{order.id}}">
    <td><a href="{{order_page(order.id)}}">{{order.id}}</a></td>
    <td data-kind="{{order.operation}}" title="{{order.operation}}">{{words.order_kind(order.operation)}}</td>
    <td class="status-{{order.status}}" data-status="{{order.status}}" title="{{order.status}}">{{words.order_status(order.status)}}</td>
    <td>{{money(order.amount_minor, order.currency)}}</td>
    <td>{{money(order.refunded_amount_minor, order.currency) if order.refunded_amount_minor else ""}}</td>
    <td data-settled-by="{{order.settled_by or ''}}" data-provider="{{order.provider or ''}}">{{words.provider_name(order.provider) or words.settled(order)}}</td>
    <td class="muted">{{iso(order.created_at)}}</td>
    <td>
      % for operation_id in sections["order_operations"][order.id]:
      <a class="operation-link" href="{{operation_page(operation_id)}}">operation {{operation_id}}</a>
      % end
    </td>
  </tr>
  % end
</table>
% if sections["orders_next"]:
<p><a href="?ordersCursor={{sections["orders_next"]}}">Older orders →</a></p>
% end
% end

<h2>Payments</h2>
% if not sections["payments"]:
<div class="empty">No payments at a provider.</div>
% else:
<table id="payments">
  <tr><th>payment</th><th>order</th><th>provider</th><th>status</th><th>amount</th><th>created</th></tr>
  % for intent in sections["payments"]:
  <tr data-payment="{{intent.id}}">
    <td><a href="{{payment_page(intent.id)}}">{{intent.id}}</a></td>
    <td><a href="{{order_page(intent.order_id)}}">{{intent.order_id}}</a></td>
    <td data-provider="{{intent.provider}}">{{words.provider_name(intent.provider)}}</td>
    <td class="status-{{intent.status}}" data-status="{{intent.status}}" title="{{intent.status}}">{{words.payment_status(intent.status)}}</td>
    <td>{{money(intent.amount_minor, intent.currency)}}</td>
    <td class="muted">{{iso(intent.created_at)}}</td>
  </tr>
  % end
</table>
% if sections["payments_next"]:
<p><a href="?paymentsCursor={{sections["payments_next"]}}">Older payments →</a></p>
% end
% end

<h2>Wallet</h2>
<p id="balances">
  % if not sections["balances"]:
  <span class="muted">No wallet yet.</span>
  % end
  % for currency, amount in sorted(sections["balances"].items()):
  <span class="figure" data-currency="{{currency}}">{{money(amount, currency)}}</span>
  % end
</p>
% if sections["wallet"]:
<table id="wallet">
  <tr><th>when</th><th>movement</th><th>amount</th><th>order</th><th>expires</th></tr>
  % for item in sections["wallet"]:
  <tr>
    <td class="muted">{{iso(item.created_at)}}</td>
    <td data-kind="{{item.kind}}" title="{{item.kind}}">{{words.ledger_kind(item.kind)}}</td>
    <td>{{money(item.amount_minor, item.currency)}}</td>
    <td>
      % if item.order_id:
      <a href="{{order_page(item.order_id)}}">{{item.order_id}}</a>
      % end
    </td>
    <td class="muted">{{iso(item.expires_at)}}</td>
  </tr>
  % end
</table>
% if sections["wallet_next"]:
<p><a href="?walletCursor={{sections["wallet_next"]}}">Older movements →</a></p>
% end
% end
% end
% if sections is not None:
<h2>Personal offers</h2>
% if not sections["offers"]:
<div class="empty">No personal offer.</div>
% else:
<table id="offers">
  <tr><th>offer</th><th>discount</th><th>plan</th><th>status</th><th>expires</th><th>used by</th></tr>
  % for offer in sections["offers"]:
  <tr data-offer="{{offer.id}}">
    <td>{{offer.id}}</td>
    <td>{{f"{offer.discount_percent} %" if offer.discount_percent is not None else money(offer.discount_minor, offer.currency)}}</td>
    <td>{{offer.plan_id or "any plan"}}</td>
    <td class="status-{{offer.status}}" data-status="{{offer.status}}">{{offer.status}}</td>
    <td class="muted">{{iso(offer.expires_at)}}</td>
    <td>
      % if offer.used_order_id:
      <a href="{{order_page(offer.used_order_id)}}">{{offer.used_order_id}}</a>
      % end
    </td>
  </tr>
  % end
</table>
% end
% if sections["can_offer"]:
<form id="offer-create" class="inline" style="margin:12px 0; flex-wrap:wrap" data-action="/v1/panel/customers/{{customer.id}}/offers">
  <input name="percent" type="number" min="1" max="100" placeholder="% off" style="width:6em" aria-label="discount in percent">
  <span class="muted">or</span>
  <input name="amount" placeholder="amount off, e.g. 50.00" size="12" aria-label="discount amount">
  <input name="currency" placeholder="RUB" size="4" aria-label="currency of the amount">
  <select name="planId" aria-label="plan">
    <option value="">any plan</option>
    % for plan in sections["offer_plans"]:
    <option value="{{plan.id}}">{{plan.name}}</option>
    % end
  </select>
  <input name="validDays" type="number" min="1" max="365" value="7" required style="width:5em" aria-label="valid for days">
  <input name="reason" placeholder="reason" required size="16" aria-label="reason for the offer">
  <button type="submit">Make offer</button><span class="error" style="color:var(--bad)"></span>
</form>
<script nonce="{{nonce}}">
  const offerForm = document.getElementById("offer-create");
  offerForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (name) => offerForm.querySelector(`[name=${name}]`).value.trim();
    const body = { validDays: Number(value("validDays")) };
    if (value("percent")) body.discountPercent = Number(value("percent"));
    if (value("amount")) {
      const currency = value("currency").toUpperCase();
      const places = { XTR: 0, JPY: 0 }[currency] ?? 2;
      body.discountMinor = Math.round(Number(value("amount")) * 10 ** places);
      body.currency = currency;
    }
    if (value("planId")) body.planId = Number(value("planId"));
    const answer = await fetch(offerForm.dataset.action, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Operator-Reason": "UTF-8''" + encodeURIComponent(value("reason")) },
      body: JSON.stringify(body),
    });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    offerForm.querySelector(".error").textContent = problem.detail || "refused";
  });
</script>
% end

<h2>Ratings of the shop</h2>
% if not sections["ratings"]:
<div class="empty">No rating yet.</div>
% else:
<table id="ratings">
  <tr><th>order</th><th>rating</th><th>when</th></tr>
  % for rating in sections["ratings"]:
  <tr data-rating-order="{{rating.order_id}}">
    <td><a href="{{order_page(rating.order_id)}}">{{rating.order_id}}</a></td>
    <td data-rating="{{rating.rating}}">{{"★" * rating.rating}}{{"☆" * (5 - rating.rating)}}</td>
    <td class="muted">{{iso(rating.created_at)}}</td>
  </tr>
  % end
</table>
% end
% end
