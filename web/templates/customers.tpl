% rebase("layout", title="Customers", operator=operator, here="/panel/customers")
% from commerce.customers import shown_name
<h1>Customers</h1>
<form class="filters" method="get" id="customer-search" style="flex-wrap:wrap">
  <label style="max-width:100%">Find <input name="q" value="{{text}}" size="40" style="max-width:100%; box-sizing:border-box" placeholder="name, @username, Telegram id, customer id or panel username" aria-label="search"></label>
  <button type="submit">Search</button>
  % if text:
  <a href="/panel/customers">all customers</a>
  % end
</form>
% if error:
<div class="notice" id="search-error">{{error}}</div>
% elif not rows:
<div class="empty">{{"No customer matches " + repr(text) + "." if text else "No customers yet."}}</div>
% else:
<div class="table-scroll" style="overflow-x:auto; max-width:100%"><table id="customers">
  <tr><th>name</th><th>phase</th><th>plan</th><th>ends</th><th>wallet</th><th>Telegram</th><th>since</th></tr>
  % for customer in rows:
  % state, plan_name, ends_at, balances = summary[customer.id]
  <tr data-customer="{{customer.id}}">
    <td><a href="{{customer_page(customer.id)}}" title="{{customer.id}}">{{shown_name(customer.display_name) or customer.id}}</a>{{" (blocked)" if customer.blocked else ""}}</td>
    <td>
      % if state:
      <span class="phase-{{state}}" data-phase="{{state}}">{{state}}</span>
      % else:
      <span class="muted">no subscription</span>
      % end
    </td>
    <td>{{plan_name or ""}}</td>
    <td class="muted">{{iso(ends_at) if ends_at else ""}}</td>
    <td data-wallet>{{", ".join(money(amount, currency) for currency, amount in balances.items()) if balances else ""}}</td>
    <td>{{"@" + customer.telegram_username if customer.telegram_username else ""}} <span class="muted">{{customer.telegram_id or ""}}</span></td>
    <td class="muted">{{iso(customer.created_at)}}</td>
  </tr>
  % end
</table></div>
% end
% if next_cursor:
<p><a href="?cursor={{next_cursor}}">Older →</a></p>
% end
