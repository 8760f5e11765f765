<style>
  .list-filters { flex-wrap: wrap; }
  .table-scroll { overflow-x: auto; }
</style>
<form class="filters list-filters" method="get" id="filters" action="/panel/{{name}}">
  <label>Find <input name="q" value="{{given['q']}}" size="24" placeholder="id, provider's id, name, @username, Telegram id"></label>
  <label>Status <select name="status">
    <option value="">any</option>
    % for value in statuses:
    <option value="{{value}}"{{!" selected" if given['status'] == value else ""}}>{{status_word(value)}}</option>
    % end
  </select></label>
  <label>Kind <select name="kind">
    <option value="">any</option>
    % for value in kinds:
    <option value="{{value}}"{{!" selected" if given['kind'] == value else ""}}>{{words.order_kind(value)}}</option>
    % end
  </select></label>
  <label>Provider <select name="provider">
    <option value="">any</option>
    % for value in providers:
    <option value="{{value}}"{{!" selected" if given['provider'] == value else ""}}>{{words.provider_name(value)}}</option>
    % end
  </select></label>
  <label>Currency <input name="currency" value="{{given['currency']}}" size="4" maxlength="3" placeholder="RUB"></label>
  <label>From <input type="date" name="from" value="{{given['from']}}"></label>
  <label>To <input type="date" name="to" value="{{given['to']}}"></label>
  <label>Customer <input name="customer" value="{{given['customer']}}" size="12" placeholder="customer id"></label>
  <button type="submit">Filter</button>
  <a href="/panel/{{name}}">clear</a>
  % if csv_link:
  <a href="{{csv_link}}" id="export-csv" download>Export CSV</a>
  % end
</form>
% if error:
<div class="notice" id="filter-error">{{error}}</div>
% end
% if totals:
<p class="panel-box" id="totals">Total of the filtered {{name}}:
  % for index, total in enumerate(totals):
  <span class="total" data-currency="{{total['currency']}}" data-amount-minor="{{total['amountMinor']}}" data-count="{{total['count']}}">{{"· " if index else ""}}<strong>{{money(total['amountMinor'], total['currency'])}}</strong> in {{total['count']}}{{(", refunded " + money(total['refundedAmountMinor'], total['currency'])) if total.get('refundedAmountMinor') else ""}}</span>
  % end
</p>
% end
