% rebase("layout", title="Anomalies", operator=operator, here="/panel/system/anomalies")
<h1>Anomaly rules</h1>
<p class="muted">Measured every 15 minutes by the worker's <span class="code">anomaly_evaluation</span> pass (it needs APP_DATA_ENCRYPTION_KEY). A rule that is breached sends one notice to the operator chat per window.</p>
<table id="anomaly-rules">
  <tr><th>rule</th><th>now</th><th>alerts when</th><th>window</th><th>enabled</th><th>changed</th>{{!'<th></th>' if can_write else ''}}</tr>
  % for rule in rules:
  <tr data-rule="{{rule["rule"]}}" class="{{'status-failed' if rule["breached"] else ''}}">
    <td class="code">{{rule["rule"]}}</td>
    <td data-current="{{'' if rule["current"] is None else rule["current"]}}">{{"too few samples" if rule["current"] is None else f'{rule["current"]} {rule["unit"]}'}}</td>
    <td>{{"≥" if rule["breachedWhen"] == "above" else "<"}} {{rule["threshold"]}} {{rule["unit"]}}</td>
    <td>{{rule["windowMinutes"]}} min</td>
    <td>{{"yes" if rule["enabled"] else "no"}}</td>
    <td class="muted">{{rule["updatedAt"]}} {{rule["updatedBy"] or ""}}</td>
    % if can_write:
    <td><form class="inline rule-change" data-action="/v1/panel/system/anomaly-rules/{{rule["rule"]}}">
      <input name="threshold" type="number" value="{{rule["threshold"]}}" required style="width:7em" aria-label="threshold of {{rule["rule"]}}">
      <input name="windowMinutes" type="number" value="{{rule["windowMinutes"]}}" required style="width:5em" aria-label="window in minutes of {{rule["rule"]}}">
      <label><input name="enabled" type="checkbox" {{'checked' if rule["enabled"] else ''}}> on</label>
      <input name="reason" placeholder="reason" required size="14" aria-label="reason for changing {{rule["rule"]}}">
      <button type="submit">Save</button><span class="error" style="color:var(--bad)"></span>
    </form></td>
    % end
  </tr>
  % end
</table>
<h2 style="font-size:16px; margin-top:24px">Latest anomaly notices</h2>
% if not notices:
<div class="empty">No anomaly so far.</div>
% else:
<table id="anomaly-notices">
  <tr><th>when</th><th>rule</th><th>value</th><th>threshold</th><th>window from</th><th>delivered</th></tr>
  % for notice, payload in notices:
  <tr><td class="muted">{{iso(notice.created_at)}}</td><td class="code">{{payload.get("rule")}}</td><td>{{payload.get("value")}} {{payload.get("unit", "")}}</td><td>{{payload.get("threshold")}}</td><td class="muted">{{payload.get("windowStart")}}</td><td>{{notice.status}}</td></tr>
  % end
</table>
% end
<script nonce="{{nonce}}">
  for (const form of document.querySelectorAll("form.rule-change")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const reason = form.querySelector("input[name=reason]").value.trim();
      const body = {
        threshold: Number(form.querySelector("input[name=threshold]").value),
        windowMinutes: Number(form.querySelector("input[name=windowMinutes]").value),
        enabled: form.querySelector("input[name=enabled]").checked,
      };
      const answer = await fetch(form.dataset.action, {
        method: "PUT",
        headers: { "Content-Type": "application/json", "X-Operator-Reason": "UTF-8''" + encodeURIComponent(reason) },
        body: JSON.stringify(body),
      });
      if (answer.ok) { location.reload(); return; }
      const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
      form.querySelector(".error").textContent = problem.detail || "refused";
    });
  }
</script>
