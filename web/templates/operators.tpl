% rebase("layout", title="Operators", operator=operator, here="/panel/operators")
<h1>Operators</h1>
<p class="muted">Each change ends the operator's sessions at once (enabling aside) and is audited with its reason.</p>
<table id="operators">
  <tr><th>operator</th><th>permissions</th><th>created</th><th>status</th><th>live sessions</th><th></th></tr>
  % for account in accounts:
  <tr data-operator="{{account.id}}">
    <td>{{account.username}}</td>
    <td class="muted">{{", ".join(sorted(account.permission_set))}}</td>
    <td class="muted">{{iso(account.created_at)}}</td>
    <td class="{{'status-failed' if account.disabled_at else 'status-succeeded'}}">{{"disabled " + iso(account.disabled_at) if account.disabled_at else "active"}}</td>
    <td>{{sessions.get(account.id, 0)}}</td>
    <td>
      <form class="inline operator-change" data-operator="{{account.id}}">
        <input name="reason" placeholder="reason" required size="18" aria-label="reason for the change to {{account.username}}">
        % if account.disabled_at:
        <button type="submit" data-action="/v1/panel/operators/{{account.id}}/enable">Enable</button>
        % else:
        <button type="submit" class="danger" data-action="/v1/panel/operators/{{account.id}}/disable">Disable</button>
        <button type="submit" data-action="/v1/panel/operators/{{account.id}}/revoke-sessions">End sessions</button>
        % end
        <span class="error" style="color:var(--bad)"></span>
      </form>
      <form class="inline operator-change" data-password="{{account.id}}" style="margin-top:6px">
        <input name="password" data-field="password" type="password" autocomplete="new-password" required minlength="12" placeholder="new password" size="16" aria-label="new password for {{account.username}}">
        <input name="reason" placeholder="reason" required size="18" aria-label="reason for resetting the password of {{account.username}}">
        <button type="submit" data-action="/v1/panel/operators/{{account.id}}/password">Reset password</button>
        <span class="error" style="color:var(--bad)"></span>
      </form>
    </td>
  </tr>
  % end
</table>
