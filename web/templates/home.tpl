% rebase("layout", title="Home", operator=operator, here="/panel")
<h1>Home <span class="muted">· {{figures["date"]}} · times in {{figures["timeZone"]}}</span></h1>
<div class="figures">
  <div class="panel-box" id="revenue">
    <strong>Revenue</strong>
    % if figures["revenue"] is None:
    <p class="muted">Needs the payments.read permission.</p>
    % else:
    % for label, key in (("today", "today"), ("this month", "month")):
    <p><span class="muted">{{label}}</span><br>
      % if not figures["revenue"][key]:
      <span class="figure">–</span>
      % end
      % for row in figures["revenue"][key]:
      <span class="figure" data-currency="{{row["currency"]}}">{{money(row["amountMinor"], row["currency"])}}</span><br>
      % end
    </p>
    % end
    <p class="muted">Net, per currency, from the ledger's revenue account: wallet top-ups count when they are spent, refunds are taken off.</p>
    % end
  </div>
  <div class="panel-box" id="customers">
    <strong>Customers</strong>
    % if figures["customers"] is None:
    <p class="muted">Needs the subscriptions.read permission.</p>
    % else:
    <p><span class="muted">new today</span><br><span class="figure">{{figures["customers"]["newToday"]}}</span></p>
    <p><span class="muted">new this month</span><br><span class="figure">{{figures["customers"]["newThisMonth"]}}</span></p>
    <p><span class="muted">active subscriptions</span><br><span class="figure" id="active-subscriptions">{{figures["subscriptions"]["active"]}}</span></p>
    % without_access = figures["subscriptions"]["withoutAccessIds"]
    <p id="without-access"><span class="muted">paid, no access (failed: re-provision from the subscription's page)</span><br>
      <span class="figure" style="{{'color:var(--bad)' if without_access else ''}}">{{figures["subscriptions"]["withoutAccess"]}}</span>
      % for subscription_id in without_access:
      <br><a href="{{subscription_page(subscription_id)}}">subscription {{subscription_id}}</a>
      % end
    </p>
    <p><a href="/panel/customers">Find a customer →</a></p>
    % end
  </div>
  <div class="panel-box" id="failing">
    <strong>Failing operations</strong>
    % if figures["operations"] is None:
    <p class="muted">Needs the system.read permission.</p>
    % else:
    <p><span class="muted">failed (need an operator)</span><br><a class="figure" href="/panel/system/operations?status=failed">{{figures["operations"]["failed"]}}</a></p>
    <p><span class="muted">retrying by themselves</span><br><a class="figure" href="/panel/system/operations?status=retrying">{{figures["operations"]["retrying"]}}</a></p>
    % end
  </div>
  <div class="panel-box" id="queue-health">
    <strong>Queue</strong>
    % if figures["queue"] is None:
    <p class="muted">Needs the system.read permission.</p>
    % else:
    % queue = figures["queue"]
    % if queue["maintenance"]:
    <p style="color:var(--bad)"><strong>Maintenance mode is on</strong>: fulfillment and purchases are held.</p>
    % end
    <table>
      % for label, key in (("available", "available"), ("running", "running"), ("retryable", "retryable"), ("scheduled", "scheduled"), ("dead letters", "deadLetters"), ("outbox pending", "outboxPending")):
      <tr><td>{{label}}</td><td>{{queue[key]}}</td></tr>
      % end
    </table>
    <p><a href="/panel/system/queue">Queue →</a></p>
    % end
  </div>
</div>
