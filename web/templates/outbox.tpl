% rebase("layout", title="Outbox", operator=operator, here="/panel/system/outbox")
<h1>Outbox <span class="muted">· {{len(rows)}} pending</span></h1>
<h2 style="font-size:16px">Destinations</h2>
% if not destinations:
<div class="empty">No destination: events are published as soon as they are routed.</div>
% else:
<table id="destinations">
  <tr><th>id</th><th>url</th><th>topics</th><th>pending</th><th>retrying</th><th>dead</th><th>added</th>{{!'<th></th>' if can_write else ''}}</tr>
  % for d in destinations:
  <tr data-destination="{{d["id"]}}"><td>{{d["id"]}}</td><td class="code">{{d["url"]}}</td><td>{{", ".join(d["topics"])}}</td><td>{{d["pending"]}}</td><td>{{d["retrying"]}}</td><td class="{{'status-failed' if d["dead"] else ''}}">{{d["dead"]}}</td><td class="muted">{{d["createdAt"]}}</td>
    % if can_write:
    <td><form class="inline destination-remove" data-action="/v1/panel/system/outbox/destinations/{{d["id"]}}">
      <input name="reason" placeholder="reason" required size="18" aria-label="reason for removing destination {{d["id"]}}">
      <button type="submit" class="danger">Remove</button><span class="error" style="color:var(--bad)"></span>
    </form></td>
    % end
  </tr>
  % end
</table>
% end
% if can_write:
<form id="destination-add" class="inline" style="margin:12px 0; flex-wrap:wrap">
  <input name="url" placeholder="https://receiver.example/hooks" required size="34" aria-label="destination URL">
  <input name="topics" placeholder="topics: order.paid,wallet.credited or *" required size="30" aria-label="topics">
  <input name="secret" placeholder="signing secret (whsec_…)" required size="30" aria-label="signing secret" autocomplete="off">
  <button type="button" id="secret-generate">Generate</button>
  <input name="reason" placeholder="reason" required size="18" aria-label="reason for adding the destination">
  <button type="submit">Add</button><span class="error" style="color:var(--bad)"></span>
</form>
<p class="muted">A generated secret is made in this browser: copy it to the receiver now. It is sealed when added and never shown again.</p>
% end
<h2 style="font-size:16px; margin-top:24px">Pending events</h2>
% if not rows:
<div class="empty">Nothing waiting to be published.</div>
% else:
<table id="outbox">
  <tr><th>topic</th><th>age</th></tr>
  % for topic, age in rows:
  <tr><td>{{topic}}</td><td>{{age}}</td></tr>
  % end
</table>
% end
<script nonce="{{nonce}}">
  async function send(form, method, url, body) {
    const reason = form.querySelector("input[name=reason]").value.trim();
    const headers = { "X-Operator-Reason": "UTF-8''" + encodeURIComponent(reason) };
    if (body) headers["Content-Type"] = "application/json";
    const answer = await fetch(url, { method, headers, body: body ? JSON.stringify(body) : undefined });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    form.querySelector(".error").textContent = problem.detail || "refused";
  }
  const add = document.getElementById("destination-add");
  if (add) {
    document.getElementById("secret-generate").addEventListener("click", () => {
      const bytes = crypto.getRandomValues(new Uint8Array(32));
      add.querySelector("input[name=secret]").value = "whsec_" + btoa(String.fromCharCode(...bytes));
    });
    add.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = (name) => add.querySelector(`input[name=${name}]`).value.trim();
      const topics = value("topics") === "*" ? ["*"] : value("topics").split(",").map((t) => t.trim()).filter(Boolean);
      send(add, "POST", "/v1/panel/system/outbox/destinations", { url: value("url"), topics, secret: value("secret") });
    });
  }
  document.querySelectorAll("form.destination-remove").forEach((form) => form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(form, "DELETE", form.dataset.action);
  }));
</script>
