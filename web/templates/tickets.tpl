% rebase("layout", title="Support", operator=operator, here="/panel/support")
<h1>Support</h1>
<form class="filters" method="get" id="ticket-filter">
  <label>Status
    <select name="status">
      % for choice in statuses:
      <option value="{{choice}}" {{"selected" if choice == status else ""}}>{{choice}}</option>
      % end
    </select>
  </label>
  <button type="submit">Show</button>
  <span class="muted">open: the customer wrote last · answered: waiting for the customer</span>
</form>
% if error:
<div class="notice" id="status-error">{{error}}</div>
% elif not rows:
<div class="empty">No {{status}} ticket.</div>
% else:
<table id="tickets">
  <tr><th>ticket</th><th>customer</th><th>status</th><th>messages</th><th>opened</th><th>last activity</th></tr>
  % for ticket in rows:
  <tr data-ticket="{{ticket.id}}">
    <td><a href="{{ticket_page(ticket.id)}}">{{ticket.id}}</a></td>
    <td class="code"><a href="{{customer_page(ticket.customer_id)}}">{{ticket.customer_id}}</a></td>
    <td class="status-{{ticket.status}}">{{ticket.status}}</td>
    <td>{{messages.get(ticket.id, 0)}}</td>
    <td class="muted">{{iso(ticket.created_at)}}</td>
    <td class="muted">{{iso(ticket.updated_at)}}</td>
  </tr>
  % end
</table>
% if len(rows) == ticket_rows:
<p class="muted">The {{ticket_rows}} most recently active shown.</p>
% end
% end
