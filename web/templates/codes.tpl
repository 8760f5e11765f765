% rebase("layout", title="Codes", operator=operator, here="/panel/codes")
<h1>Gift cards and access codes</h1>
<p class="muted">A code is shown once, right after it is issued: the shop keeps only a hash of it. Personal offers are made on a <a href="/panel/customers">customer's page</a>.</p>
% if can_issue:
<form id="codes-issue" class="inline" style="margin:12px 0; flex-wrap:wrap">
  <select name="kind" aria-label="what to issue">
    <option value="access-codes">access codes</option>
    <option value="gift-cards">gift cards (single use)</option>
  </select>
  <select name="planId" aria-label="plan" required>
    % for plan in plans:
    <option value="{{plan.id}}">{{plan.name}}</option>
    % end
  </select>
  <input name="count" type="number" min="1" max="{{max_batch}}" value="1" required style="width:5em" aria-label="how many codes">
  <input name="maxActivations" type="number" min="1" value="1" style="width:6em" aria-label="activations per access code">
  <input name="validDays" type="number" min="1" max="3650" value="30" style="width:5em" aria-label="valid for days">
  <input name="reason" placeholder="reason" required size="16" aria-label="reason for issuing">
  <button type="submit">Issue</button><span class="error" style="color:var(--bad)"></span>
</form>
<div id="codes-issued" hidden>
  <div class="notice">These codes are shown only now. Copy them or download the CSV (once): after you leave this page nobody can show them again.</div>
  <textarea id="codes-issued-list" readonly rows="6" style="width:100%;max-width:40em" aria-label="issued codes"></textarea>
  <p><a href="#" id="codes-csv">Download CSV (once)</a></p>
</div>
<script nonce="{{nonce}}">
  const issueForm = document.getElementById("codes-issue");
  issueForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (name) => issueForm.querySelector(`[name=${name}]`).value.trim();
    const kind = value("kind");
    const body = { planId: Number(value("planId")), count: Number(value("count")) };
    if (value("validDays")) body.validDays = Number(value("validDays"));
    if (kind === "access-codes") body.maxActivations = Number(value("maxActivations"));
    const answer = await fetch(`/v1/panel/${kind}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Operator-Reason": "UTF-8''" + encodeURIComponent(value("reason")) },
      body: JSON.stringify(body),
    });
    if (!answer.ok) {
      const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
      issueForm.querySelector(".error").textContent = problem.detail || "refused";
      return;
    }
    issueForm.querySelector(".error").textContent = "";
    // The codes live only in this answer: the list and the CSV are made from it here, in the page.
    const issued = (await answer.json()).issued;
    const label = kind === "gift-cards" ? "gift card" : "access code";
    document.getElementById("codes-issued-list").value = issued.map((row) => row.code).join("\n");
    const csv = "id,kind,code\r\n" + issued.map((row) => `${row.id},${label},${row.code}`).join("\r\n") + "\r\n";
    const link = document.getElementById("codes-csv");
    const url = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
    link.href = url;
    link.download = `${kind}-${issued[0].id}.csv`;
    link.hidden = false;
    link.addEventListener("click", () => {
      setTimeout(() => { URL.revokeObjectURL(url); link.removeAttribute("href"); link.hidden = true; }, 1000);
    }, { once: true });
    document.getElementById("codes-issued").hidden = false;
  });
</script>
% end

% for kind, title, rows, next_cursor, cursor_name in (("access", "Access codes", access_codes, access_next, "accessCursor"), ("gift", "Gift cards", gift_cards, gift_next, "giftCursor")):
<h2>{{title}}</h2>
% if not rows:
<div class="empty">None issued yet.</div>
% else:
<div class="table-scroll" style="overflow-x:auto; max-width:100%"><table id="{{kind}}-codes">
  <tr><th>id</th><th>plan</th><th>status</th><th>redemptions</th><th>expires</th><th>issued</th><th></th></tr>
  % for row in rows:
  % status = status_of(row, now)
  <tr data-{{kind}}-code="{{row.id}}">
    <td>{{row.id}}</td>
    <td>{{plan_names.get(row.plan_id, row.plan_id)}}</td>
    <td class="status-{{status.replace(' ', '-')}}" data-status="{{status}}" title="{{row.revoked_reason or ''}}">{{status}}</td>
    % if kind == "access":
    <td>{{row.activation_count}} of {{row.max_activations}}</td>
    % elif row.redeemed_by_id:
    <td><a href="{{customer_page(row.redeemed_by_id)}}">redeemed</a></td>
    % else:
    <td>0 of 1</td>
    % end
    <td class="muted">{{iso(row.expires_at) if row.expires_at else "never"}}</td>
    <td class="muted">{{iso(row.created_at)}}</td>
    <td>
      % if can_issue and status in ("active", "inactive", "expired", "used up") and not (kind == "gift" and status == "redeemed"):
      <form class="operator-change inline">
        <input name="reason" placeholder="reason" required size="10" aria-label="reason to revoke {{row.id}}">
        <button type="submit" data-action="/v1/panel/{{'access-codes' if kind == 'access' else 'gift-cards'}}/{{row.id}}/revoke">Revoke</button><span class="error" style="color:var(--bad)"></span>
      </form>
      % end
    </td>
  </tr>
  % end
</table></div>
% end
% if next_cursor:
<p><a href="?{{cursor_name}}={{next_cursor}}">Older {{title.lower()}} →</a></p>
% end
% end
