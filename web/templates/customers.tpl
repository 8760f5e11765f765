% rebase("layout", title="Customers", operator=operator, here="/panel/customers")
% from commerce.customers import shown_name
<h1>Customers</h1>
<form class="filters" method="get" id="customer-search">
  <label>Find <input name="q" value="{{text}}" size="40" placeholder="customer id, Telegram id, @username or panel username" aria-label="search"></label>
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
<table id="customers">
  <tr><th>customer</th><th>name</th><th>Telegram id</th><th>username</th><th>since</th></tr>
  % for customer in rows:
  <tr data-customer="{{customer.id}}">
    <td class="code"><a href="{{customer_page(customer.id)}}">{{customer.id}}</a></td>
    <td>{{shown_name(customer.display_name)}}{{" (blocked)" if customer.blocked else ""}}</td>
    <td>{{customer.telegram_id or ""}}</td>
    <td>{{"@" + customer.telegram_username if customer.telegram_username else ""}}</td>
    <td class="muted">{{iso(customer.created_at)}}</td>
  </tr>
  % end
</table>
% end
% if next_cursor:
<p><a href="?cursor={{next_cursor}}">Older →</a></p>
% end
