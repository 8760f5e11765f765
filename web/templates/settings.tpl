% rebase("layout", title="Settings", operator=operator, here="")
<h1>Settings</h1>
<form id="time-zone-form" class="panel-box" style="display:grid; gap:10px; max-width:420px">
  <label>Time zone, for every time on these pages
    <select name="timeZone" id="time-zone-select">
      % for zone in zones:
      <option value="{{zone}}" {{'selected' if zone == current else ''}}>{{zone}}</option>
      % end
    </select>
  </label>
  <button type="submit">Save</button>
  <div class="muted" id="time-zone-result"></div>
</form>
<script nonce="{{nonce}}">
  document.getElementById("time-zone-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await fetch("/v1/panel/session/time-zone", {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ timeZone: document.getElementById("time-zone-select").value }),
    });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    document.getElementById("time-zone-result").textContent = problem.detail || "refused";
  });
</script>
