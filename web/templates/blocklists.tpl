% rebase("layout", title="Blocklists", operator=operator, here="/panel/system/blocklists")
<h1>Blocklists <span class="muted">· {{len(sources)}} of {{max_sources}} sources</span></h1>
<p class="muted">Each source is a URL answering Telegram ids, one per line, refreshed every 5 minutes (only with
APP_DATA_ENCRYPTION_KEY set). A customer any source lists cannot buy or activate; a source that fails keeps its
last good list.</p>
% if not sources:
<div class="empty">No source: nobody is blocked by a list.</div>
% else:
<table id="blocklist-sources">
  <tr><th>id</th><th>url</th><th>token</th><th>status</th><th>last refresh</th><th>last success</th><th>list changed</th><th>ids</th><th>blocked customers</th><th>failures</th><th>last error</th>{{!'<th></th>' if can_write else ''}}</tr>
  % for s in sources:
  <tr data-source="{{s["id"]}}"><td>{{s["id"]}}</td><td class="code">{{s["url"]}}</td><td>{{"sealed" if s["hasToken"] else "none"}}</td><td class="{{'status-failed' if s["status"] == "failed" else ''}}">{{s["status"]}}</td><td class="muted">{{s["lastRefreshAt"] or "never"}}</td><td class="muted">{{s["lastSuccessAt"] or "never"}}</td><td class="muted">{{s["listChangedAt"] or "never"}}</td><td>{{s["entryCount"]}}</td><td>{{s["blockedCustomers"]}}</td><td>{{s["failureCount"]}}</td><td class="code">{{s["lastError"] or ""}}</td>
    % if can_write:
    <td><form class="inline source-remove" data-action="/v1/panel/system/blocklists/{{s["id"]}}">
      <input name="reason" placeholder="reason" required size="18" aria-label="reason for removing source {{s["id"]}}">
      <button type="submit" class="danger">Remove</button><span class="error" style="color:var(--bad)"></span>
    </form></td>
    % end
  </tr>
  % end
</table>
% end
% if can_write:
<form id="source-add" class="inline" style="margin:12px 0; flex-wrap:wrap">
  <input name="url" placeholder="https://lists.example/telegram-ids.txt" required size="40" aria-label="source URL">
  <input name="token" placeholder="bearer token (optional)" size="30" aria-label="token" autocomplete="off">
  <input name="reason" placeholder="reason" required size="18" aria-label="reason for adding the source">
  <button type="submit">Add</button><span class="error" style="color:var(--bad)"></span>
</form>
<p class="muted">A token is sealed when added and never shown again.</p>
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
  const add = document.getElementById("source-add");
  if (add) add.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = (name) => add.querySelector(`input[name=${name}]`).value.trim();
    send(add, "POST", "/v1/panel/system/blocklists", { url: value("url"), token: value("token") || null });
  });
  document.querySelectorAll("form.source-remove").forEach((form) => form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(form, "DELETE", form.dataset.action);
  }));
</script>
