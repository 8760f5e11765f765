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
</style>
</head>
<body>
% if defined('operator') and operator:
<header>
  <strong>Omniflow</strong>
  <nav aria-label="System">
    <span class="section">System</span>
    % for href, label in (("/panel/system/operations", "Operations"), ("/panel/system/drift", "Drift"), ("/panel/system/outbox", "Outbox"), ("/panel/system/queue", "Queue")):
    <a href="{{href}}" class="{{'here' if here == href else ''}}">{{label}}</a>
    % end
  </nav>
  <span class="who">{{operator.username}} · <a href="#" id="sign-out">sign out</a></span>
</header>
% end
<main>
{{!base}}
</main>
<script>
  const out = document.getElementById("sign-out");
  if (out) out.addEventListener("click", async (event) => {
    event.preventDefault();
    await fetch("/v1/panel/session", { method: "DELETE" });
    location.href = "/panel/login";
  });
  // Retry / Cancel: the same API the panel exposes, with the operator's reason.
  document.querySelectorAll("form.operator-change").forEach((form) => form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const reason = form.querySelector("input[name=reason]").value.trim();
    const button = event.submitter || form.querySelector("button");
    const headers = { "X-Operator-Reason": reason };
    if (button.dataset.body) headers["Content-Type"] = "application/json";
    const answer = await fetch(button.dataset.action, { method: "POST", headers, body: button.dataset.body || undefined });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    form.querySelector(".error").textContent = problem.detail || "refused";
  }));
</script>
</body>
</html>
