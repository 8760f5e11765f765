% rebase("layout", title="Goods", operator=operator, here="/panel/goods")
<h1>Goods</h1>
<p class="muted">Digital goods sold beside plans, each bought from its provider under the provider's SKU. Customers see active goods in the bot's Shop and at checkout, in the currencies they are priced in. <a href="/panel/goods/deliveries">Deliveries needing review</a></p>
% if not goods:
<div class="empty">No goods yet.</div>
% else:
<div style="overflow-x:auto">
<table id="goods">
  <tr><th>goods</th><th>code</th><th>provider · SKU</th><th>prices</th><th>status</th>{{!"<th>change</th>" if can_write else ""}}</tr>
  % for row in goods:
  <tr data-goods="{{row["id"]}}">
    <td>{{row["name"]}}</td>
    <td class="code">{{row["code"]}}</td>
    <td>{{row["provider"]}} · <span class="code">{{row["sku"]}}</span></td>
    <td>{{" · ".join(money(amount, currency) for currency, amount in row["prices"].items()) or "no price"}}</td>
    <td>{{"on sale" if row["active"] else "off sale"}}</td>
    % if can_write:
    <td>
      <form class="inline goods-change" data-action="/v1/panel/goods/{{row["id"]}}">
        <input name="name" value="{{row["name"]}}" required size="14" aria-label="name of {{row["code"]}}">
        <input name="sku" value="{{row["sku"]}}" required size="10" aria-label="SKU of {{row["code"]}}">
        <input name="prices" value="{{" ".join(f"{currency}={amount}" for currency, amount in row["prices"].items())}}" required size="16" aria-label="prices of {{row["code"]}} in minor units, e.g. RUB=19900 XTR=250">
        <input name="reason" placeholder="reason" required size="12" aria-label="reason for changing {{row["code"]}}">
        <button type="submit">Save</button>
        <button type="submit" data-active="{{"false" if row["active"] else "true"}}" class="{{"danger" if row["active"] else ""}}">{{"Deactivate" if row["active"] else "Activate"}}</button>
        <span class="error" style="color:var(--bad)"></span>
      </form>
    </td>
    % end
  </tr>
  % end
</table>
</div>
% end
<h2 style="font-size:16px; margin-top:24px">Providers</h2>
% if not providers:
<div class="empty">No provider yet: add one before its goods.</div>
% else:
<div style="overflow-x:auto">
<table id="goods-providers">
  <tr><th>provider</th><th>URL</th><th>token</th></tr>
  % for provider in providers:
  <tr><td>{{provider["name"]}}</td><td class="code">{{provider["url"]}}</td><td>{{"sealed" if provider["tokenUsable"] else "cannot be unsealed here"}}</td></tr>
  % end
</table>
</div>
% end
% if can_write:
<h2 style="font-size:16px; margin-top:24px">Add goods</h2>
<form class="stacked goods-add" id="goods-add" data-action="/v1/panel/goods">
  <label>code <input name="code" required size="12"></label>
  <label>name <input name="name" required size="16"></label>
  <label>provider <select name="providerId" required>
    % for provider in providers:
    <option value="{{provider["id"]}}">{{provider["name"]}}</option>
    % end
  </select></label>
  <label>SKU <input name="sku" required size="12"></label>
  <label>prices in minor units <input name="prices" required size="18" placeholder="RUB=19900 XTR=250"></label>
  <label>reason <input name="reason" required size="16"></label>
  <button type="submit">Add goods</button>
  <span class="error" style="color:var(--bad)"></span>
</form>
<h2 style="font-size:16px; margin-top:24px">Add a provider</h2>
<form class="stacked goods-add" id="provider-add" data-action="/v1/panel/goods/providers">
  <label>name <input name="name" required size="14"></label>
  <label>URL <input name="url" type="url" required size="24"></label>
  <label>API token <input name="token" type="password" required size="18" autocomplete="off"></label>
  <label>reason <input name="reason" required size="16"></label>
  <button type="submit">Add provider</button>
  <span class="error" style="color:var(--bad)"></span>
</form>
% end
<script nonce="{{nonce}}">
  // "RUB=19900 XTR=250" → {"RUB": 19900, "XTR": 250}; anything else is sent as it is, for the API to refuse.
  const prices = (text) => Object.fromEntries(text.trim().split(/[\s,]+/).filter(Boolean).map((pair) => {
    const [currency, amount] = pair.split("=");
    return [currency.toUpperCase(), /^\d+$/.test(amount || "") ? Number(amount) : amount];
  }));
  async function send(form, body) {
    const reason = form.querySelector("input[name=reason]").value.trim();
    const answer = await fetch(form.dataset.action, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Operator-Reason": "UTF-8''" + encodeURIComponent(reason) },
      body: JSON.stringify(body),
    });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    form.querySelector(".error").textContent = problem.detail || "refused";
  }
  for (const form of document.querySelectorAll("form.goods-change")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const active = event.submitter && event.submitter.dataset.active;
      const field = (name) => form.querySelector(`input[name=${name}]`).value.trim();
      send(form, active ? { active: active === "true" }
        : { name: field("name"), sku: field("sku"), prices: prices(field("prices")) });
    });
  }
  for (const form of document.querySelectorAll("form.goods-add")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = {};
      for (const field of form.querySelectorAll("input:not([name=reason]), select")) body[field.name] = field.value.trim();
      if ("prices" in body) body.prices = prices(body.prices);
      if ("providerId" in body) body.providerId = Number(body.providerId);
      send(form, body);
    });
  }
</script>
