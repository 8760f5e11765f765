<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · Omniflow</title>
<style>
  :root { --ink: #1d2330; --muted: #667085; --line: #e4e7ec; --accent: #2f5bd3; --bad: #b42318; --ok: #067647; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f8f9fb; }
  header { display: flex; gap: 24px; align-items: center; padding: 12px 24px; background: #fff; border-bottom: 1px solid var(--line); }
  header strong { font-size: 15px; }
  nav a { margin-right: 16px; color: var(--muted); text-decoration: none; }
  nav a.here { color: var(--ink); font-weight: 600; }
  nav .section { margin-right: 16px; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
  header .who { margin-left: auto; color: var(--muted); }
  main { padding: 20px 24px; max-width: 1200px; }
  h1 { font-size: 20px; margin: 0 0 12px; }
  table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
  th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
  .muted { color: var(--muted); }
  td.muted { white-space: nowrap; }
  .code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
  .status-failed, .status-discarded { color: var(--bad); font-weight: 600; }
  .status-succeeded, .status-completed { color: var(--ok); }
  form.inline { display: flex; gap: 6px; align-items: center; margin: 0; }
  input, select, button { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
  button { cursor: pointer; border-color: var(--accent); color: var(--accent); }
  button.danger { border-color: var(--bad); color: var(--bad); }
  .filters { display: flex; gap: 10px; margin-bottom: 12px; align-items: center; }
  .notice { padding: 8px 12px; border-radius: 6px; background: #fef3f2; color: var(--bad); margin-bottom: 12px; }
  .empty { padding: 24px; text-align: center; color: var(--muted); background: #fff; border: 1px solid var(--line); }
  .explain { color: var(--muted); font-size: 12.5px; max-width: 420px; }
  .panel-box { margin-bottom: 16px; padding: 10px 12px; background: #fff; border: 1px solid var(--line); border-radius: 6px; }
  .figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 12px; margin-bottom: 16px; }
  .figures .panel-box { margin: 0; }
  .figure { font-size: 22px; font-weight: 600; }
  h2 { font-size: 16px; margin: 24px 0 8px; }
  .phase-active, .phase-expiring { color: var(--ok); font-weight: 600; }
  .phase-failed, .phase-expired { color: var(--bad); font-weight: 600; }
  .phase-provisioning, .phase-grace, .phase-paused { color: #b54708; font-weight: 600; }
  .status-sent, .status-done, .status-answered { color: var(--ok); }
  .status-unreachable, .status-sending, .status-open { color: #b54708; }
  .status-paused, .status-draft, .status-scheduled { color: var(--muted); font-weight: 600; }
  .message { margin-bottom: 10px; padding: 10px 12px; background: #fff; border: 1px solid var(--line); border-radius: 6px; }
  .message.operator { margin-left: 48px; background: #f4f7ff; }
  .message .text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 0; }
  .message img { display: block; max-width: 320px; max-height: 320px; margin-top: 8px; border: 1px solid var(--line); }
  textarea { font: inherit; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; width: 100%; }
  form.stacked { display: grid; gap: 8px; max-width: 720px; }
</style>
</head>
<body>
% if defined('operator') and operator:
<header>
  <strong>Omniflow</strong>
  <nav aria-label="Shop">
    <span class="section">Shop</span>
    % for href, label in (("/panel", "Home"), ("/panel/customers", "Customers"), ("/panel/orders", "Orders"), ("/panel/payments", "Payments"), ("/panel/codes", "Codes"), ("/panel/goods", "Goods"), ("/panel/plans", "Plans"), ("/panel/campaigns", "Campaigns"), ("/panel/bulk-actions", "Bulk actions"), ("/panel/support", "Support")):
    <a href="{{href}}" class="{{'here' if here == href else ''}}">{{label}}</a>
    % end
  </nav>
  <nav aria-label="System">
    <span class="section">System</span>
    % for href, label in (("/panel/system/operations", "Operations"), ("/panel/system/drift", "Drift"), ("/panel/system/outbox", "Outbox"), ("/panel/system/blocklists", "Blocklists"), ("/panel/system/queue", "Queue"), ("/panel/system/anomalies", "Anomalies"), ("/panel/operators", "Operators")):
    <a href="{{href}}" class="{{'here' if here == href else ''}}">{{label}}</a>
    % end
  </nav>
  <span class="who">{{operator.username}} · <a href="/panel/settings" id="time-zone" title="times are shown in this zone">{{operator.time_zone}}</a> · <a href="#" id="sign-out">sign out</a></span>
</header>
% end
<main>
{{!base}}
</main>
<script nonce="{{nonce}}">
  const out = document.getElementById("sign-out");
  if (out) out.addEventListener("click", async (event) => {
    event.preventDefault();
    await fetch("/v1/panel/session", { method: "DELETE" });
    location.href = "/panel/login";
  });
  // An amount typed in major units ("1.50") as integer minor units of a currency with
  // `places` decimals, exactly, or null: no float ever holds money.
  function toMinor(text, places) {
    const match = /^([0-9]{1,15})(?:[.,]([0-9]+))?$/.exec(text);
    if (!match) return null;
    const fraction = (match[2] || "").replace(/0+$/, "");
    if (fraction.length > places) return null;
    const minor = Number(match[1]) * 10 ** places + Number(fraction.padEnd(places, "0") || "0");
    return Number.isSafeInteger(minor) ? minor : null;
  }
  // Retry / Cancel, Refund, Pause / Resume: the same API the panel exposes, with the operator's reason.
  document.querySelectorAll("form.operator-change").forEach((form) => form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // A form asks for a reason only where the audit needs one (a support reply needs none).
    const reason = form.querySelector("input[name=reason]");
    const button = event.submitter || form.querySelector("button");
    // RFC 8187's UTF-8'' form: fetch() refuses a header outside Latin-1, and reasons are typed in any language.
    const headers = reason ? { "X-Operator-Reason": "UTF-8''" + encodeURIComponent(reason.value.trim()) } : {};
    let values = button.dataset.body ? JSON.parse(button.dataset.body) : null;
    const amount = form.querySelector("input[name=amount]");
    if (amount && amount.value.trim()) {
      const minor = toMinor(amount.value.trim(), Number(form.dataset.places));
      if (minor === null) { form.querySelector(".error").textContent = "not an amount in this currency"; return; }
      values = { ...values, amountMinor: minor };
    }
    // Other fields go into the body under their data-field name; an empty one is left out, so the API's
    // default applies (a refund back where it was paid, a campaign to every reachable customer).
    form.querySelectorAll("[data-field]").forEach((field) => {
      if (!field.value.trim()) return;
      const value = "list" in field.dataset ? field.value.split(/[\s,]+/).filter(Boolean)
        : "number" in field.dataset ? Number(field.value) : field.value;
      values = { ...values, [field.dataset.field]: value };
    });
    const body = values ? JSON.stringify(values) : undefined;
    if (body) headers["Content-Type"] = "application/json";
    const answer = await fetch(button.dataset.action, { method: "POST", headers, body: body || undefined });
    // A button with data-show reads without changing anything (a campaign's audience preview): its answer's
    // figures are shown in the form instead of reloading the page.
    if (answer.ok && button.dataset.show) {
      const shown = (await answer.json())[button.dataset.show];
      form.querySelector(".result").textContent = Object.entries(shown).map(([k, v]) => `${k}: ${v}`).join(" · ");
      form.querySelector(".error").textContent = "";
      return;
    }
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    form.querySelector(".error").textContent = problem.detail || "refused";
  }));
</script>
</body>
</html>
