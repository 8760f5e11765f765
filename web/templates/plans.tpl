% rebase("layout", title="Plans", operator=operator, here="/panel/plans")
% def plan_fields(plan, prefix):
  <div class="fields">
    <label>Code <input name="code" data-field="code" required size="14" value="{{plan['code'] if plan else ''}}" aria-label="code" placeholder="e.g. monthly"></label>
    <label>Name <input name="name" data-field="name" required size="20" value="{{plan['name'] if plan else ''}}" aria-label="name" placeholder="as customers read it"></label>
    <label>Days <input name="durationDays" data-field="durationDays" data-number required size="5" inputmode="numeric" value="{{plan['durationDays'] if plan else ''}}" aria-label="duration in days"></label>
  </div>
  <div class="fields">
    % for currency, decimals in currencies.items():
    % amount = (plan or {}).get("prices", {}).get(currency) if plan else None
    <label>Price in {{currency}} <input name="price-{{currency}}" data-currency="{{currency}}" data-places="{{decimals}}" size="9" inputmode="decimal" value="{{major(amount, currency) if amount is not None else ''}}" placeholder="not sold" aria-label="price in {{currency}}"></label>
    % end
  </div>
  <div class="fields">
    <label>Traffic, GiB <input name="trafficGb" data-field="trafficGb" data-limit size="9" value="{{'' if not plan or plan['trafficGb'] is None else plan['trafficGb']}}" placeholder="unlimited" aria-label="traffic in GiB, empty for unlimited"></label>
    <label>Devices <input name="deviceLimit" data-field="deviceLimit" data-limit size="9" value="{{'' if not plan or plan['deviceLimit'] is None else plan['deviceLimit']}}" placeholder="unlimited" aria-label="device limit, empty for unlimited"></label>
    <label>Grace, hours <input name="graceHours" data-field="graceHours" data-number size="5" inputmode="numeric" value="{{plan['graceHours'] if plan else 0}}" aria-label="grace in hours"></label>
    <label><input type="checkbox" name="trial" data-field="trial" {{'checked' if plan and plan['trial'] else ''}} aria-label="a free trial"> free trial</label>
  </div>
  <label>Squads <textarea name="squads" data-field="squads" data-list rows="1" placeholder="squad UUIDs, spaces or commas between them" aria-label="squads">{{' '.join(plan['squads']) if plan else ''}}</textarea></label>
% end
% def addon_fields(addon):
  <div class="fields">
    <label>Code <input name="code" data-field="code" required size="14" value="{{addon['code'] if addon else ''}}" aria-label="code" placeholder="e.g. extra-50gb"></label>
    <label>Name <input name="name" data-field="name" required size="20" value="{{addon['name'] if addon else ''}}" aria-label="name"></label>
    <label>Extra traffic, GiB <input name="extraTrafficGb" data-field="extraTrafficGb" data-number size="6" inputmode="numeric" value="{{addon['extraTrafficGb'] if addon else 0}}" aria-label="extra traffic in GiB"></label>
    <label>Extra devices <input name="extraDevices" data-field="extraDevices" data-number size="4" inputmode="numeric" value="{{addon['extraDevices'] if addon else 0}}" aria-label="extra devices"></label>
  </div>
  <div class="fields">
    % for currency, decimals in currencies.items():
    % amount = addon["prices"].get(currency) if addon else None
    <label>Price in {{currency}} <input name="price-{{currency}}" data-currency="{{currency}}" data-places="{{decimals}}" size="9" inputmode="decimal" value="{{major(amount, currency) if amount is not None else ''}}" placeholder="not sold" aria-label="price in {{currency}}"></label>
    % end
  </div>
% end
% def reason_and_send(label, action, what):
  <div class="fields">
    <input name="reason" placeholder="reason" required size="30" aria-label="reason for {{what}}">
    <button type="submit" data-action="{{action}}">{{label}}</button>
    <span class="error" role="alert" style="color:var(--bad)"></span>
  </div>
% end
<style>
  .fields { display: flex; gap: 8px 12px; flex-wrap: wrap; align-items: center; }
  .scroll { overflow-x: auto; }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
  .badge.on { background: #ecfdf3; color: var(--ok); }
  .badge.off { background: #f2f4f7; color: var(--muted); }
  details.panel-box summary { cursor: pointer; font-weight: 600; }
  details form { margin-top: 8px; }
  /* The shared header does not wrap yet (issue 21, item 7): on a phone, wrap it here so this page fits. */
  @media (max-width: 700px) { header { flex-wrap: wrap; } header .who { margin-left: 0; } }
</style>
<h1>Plans and add-ons</h1>
<p class="muted">What the bot sells. A change shows in the bot at once. A price change applies to new orders only: an order keeps the price it was placed at, paid or still waiting for payment. A plan is never deleted: take it off sale, and whoever holds it keeps their access.</p>
<h2>Plans</h2>
% if not plans:
<div class="empty">No plan yet.</div>
% else:
<div class="scroll">
<table id="plans">
  <tr><th>plan</th><th>on sale</th><th>period</th><th>prices</th><th>traffic</th><th>devices</th><th>squads</th><th>grace</th></tr>
  % for plan in plans:
  <tr data-plan="{{plan['id']}}">
    <td><strong>{{plan['name']}}</strong> <span class="code muted">{{plan['code']}}</span>{{!' <span class="badge off">trial</span>' if plan['trial'] else ''}}</td>
    <td><span class="badge {{'on' if plan['active'] else 'off'}}">{{'on sale' if plan['active'] else 'off sale'}}</span></td>
    <td>{{plan['durationDays']}} days</td>
    <td>{{', '.join(money(amount, currency) for currency, amount in plan['prices'].items()) or ('free' if plan['trial'] else 'no price')}}</td>
    <td>{{'unlimited' if plan['trafficBytes'] is None else traffic(plan['trafficBytes'])}}</td>
    <td>{{'unlimited' if plan['deviceLimit'] is None else plan['deviceLimit']}}</td>
    <td>{{len(plan['squads']) or '–'}}</td>
    <td>{{plan['graceHours']}} h</td>
  </tr>
  % end
</table>
</div>
% end
% if can_change:
% for plan in plans:
<details class="panel-box" id="edit-plan-{{plan['id']}}">
  <summary>Change {{plan['name']}}</summary>
  <form class="stacked catalogue-change" aria-label="change {{plan['name']}}">
    % plan_fields(plan, plan['id'])
    % reason_and_send("Save", f"/v1/panel/plans/{plan['id']}", f"the change of {plan['name']}")
  </form>
  <form class="inline catalogue-change" aria-label="{{'take off sale' if plan['active'] else 'put on sale'}}: {{plan['name']}}">
    <input name="reason" placeholder="reason" required size="30" aria-label="reason to {{'take' if plan['active'] else 'put'}} {{plan['name']}} {{'off' if plan['active'] else 'on'}} sale">
    <button type="submit" class="{{'danger' if plan['active'] else ''}}" data-action="/v1/panel/plans/{{plan['id']}}" data-body='{"active": {{'false' if plan['active'] else 'true'}}}'>{{'Take off sale' if plan['active'] else 'Put on sale'}}</button>
    <span class="error" role="alert" style="color:var(--bad)"></span>
  </form>
</details>
% end
<details class="panel-box" id="new-plan" open>
  <summary>New plan</summary>
  <form class="stacked catalogue-change" aria-label="new plan">
    % plan_fields(None, "new")
    % reason_and_send("Create the plan", "/v1/panel/plans", "the new plan")
  </form>
</details>
% end
<h2>Add-ons</h2>
% if not addons:
<div class="empty">No add-on yet.</div>
% else:
<div class="scroll">
<table id="addons">
  <tr><th>add-on</th><th>on sale</th><th>prices</th><th>extra traffic</th><th>extra devices</th></tr>
  % for addon in addons:
  <tr data-addon="{{addon['id']}}">
    <td><strong>{{addon['name']}}</strong> <span class="code muted">{{addon['code']}}</span></td>
    <td><span class="badge {{'on' if addon['active'] else 'off'}}">{{'on sale' if addon['active'] else 'off sale'}}</span></td>
    <td>{{', '.join(money(amount, currency) for currency, amount in addon['prices'].items()) or 'no price'}}</td>
    <td>{{traffic(addon['extraTrafficBytes']) if addon['extraTrafficBytes'] else 'none'}}</td>
    <td>{{addon['extraDevices'] or 'none'}}</td>
  </tr>
  % end
</table>
</div>
% end
% if can_change:
% for addon in addons:
<details class="panel-box" id="edit-addon-{{addon['id']}}">
  <summary>Change {{addon['name']}}</summary>
  <form class="stacked catalogue-change" aria-label="change {{addon['name']}}">
    % addon_fields(addon)
    % reason_and_send("Save", f"/v1/panel/addons/{addon['id']}", f"the change of {addon['name']}")
  </form>
  <form class="inline catalogue-change" aria-label="{{'take off sale' if addon['active'] else 'put on sale'}}: {{addon['name']}}">
    <input name="reason" placeholder="reason" required size="30" aria-label="reason to {{'take' if addon['active'] else 'put'}} {{addon['name']}} {{'off' if addon['active'] else 'on'}} sale">
    <button type="submit" class="{{'danger' if addon['active'] else ''}}" data-action="/v1/panel/addons/{{addon['id']}}" data-body='{"active": {{'false' if addon['active'] else 'true'}}}'>{{'Take off sale' if addon['active'] else 'Put on sale'}}</button>
    <span class="error" role="alert" style="color:var(--bad)"></span>
  </form>
</details>
% end
<details class="panel-box" id="new-addon">
  <summary>New add-on</summary>
  <form class="stacked catalogue-change" aria-label="new add-on">
    % addon_fields(None)
    % reason_and_send("Create the add-on", "/v1/panel/addons", "the new add-on")
  </form>
</details>
<script nonce="{{nonce}}">
  // The catalogue's forms: every field is sent (an empty limit is null, "unlimited"), prices in minor units
  // (toMinor, from the layout), and the API checks what it is sent: its words show beside the button.
  document.querySelectorAll("form.catalogue-change").forEach((form) => form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = form.querySelector(".error");
    const button = event.submitter || form.querySelector("button[type=submit]");
    let values = button.dataset.body ? JSON.parse(button.dataset.body) : null;
    if (values === null) {
      values = { prices: {} };
      for (const input of form.querySelectorAll("input[data-currency]")) {
        const text = input.value.trim();
        if (!text) continue;
        const minor = toMinor(text, Number(input.dataset.places));
        if (minor === null) { error.textContent = `the price in ${input.dataset.currency} is not an amount in it`; return; }
        values.prices[input.dataset.currency] = minor;
      }
      form.querySelectorAll("[data-field]").forEach((field) => {
        const text = field.value.trim();
        const whole = /^[0-9]{1,9}$/.test(text) ? Number(text) : text;
        values[field.dataset.field] = field.type === "checkbox" ? field.checked
          : "list" in field.dataset ? text.split(/[\s,]+/).filter(Boolean)
          : "limit" in field.dataset ? (text === "" || text.toLowerCase() === "unlimited" ? null : whole)
          : "number" in field.dataset ? whole : text;
      });
    }
    const reason = form.querySelector("input[name=reason]").value.trim();
    const headers = { "X-Operator-Reason": "UTF-8''" + encodeURIComponent(reason), "Content-Type": "application/json" };
    const answer = await fetch(button.dataset.action, { method: "POST", headers, body: JSON.stringify(values) });
    if (answer.ok) { location.reload(); return; }
    const problem = await answer.json().catch(() => ({ detail: answer.statusText }));
    error.textContent = problem.detail || "refused";
  }));
</script>
% end
