% rebase("layout", title="Home", operator=operator, here="/panel")
<style>
  .needs { display: flex; flex-wrap: wrap; gap: 8px; margin: 0 0 16px; padding: 0; list-style: none; }
  .needs li { flex: 1 1 140px; padding: 10px 12px; background: #fff; border: 1px solid var(--line); border-radius: 6px; }
  .needs li.waiting { border-color: var(--bad); }
  .needs a { text-decoration: none; color: inherit; display: block; }
  .needs .figure { display: block; }
  .needs li.waiting .figure { color: var(--bad); }
  .charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 440px), 1fr)); gap: 12px; margin-bottom: 16px; }
  .charts .panel-box { margin: 0; min-width: 0; }
  .numbers { display: flex; flex-wrap: wrap; gap: 4px 20px; margin: 6px 0; }
  .numbers p { margin: 0; }
  svg.chart { display: block; width: 100%; height: 110px; background: #fbfcfe; border-bottom: 1px solid var(--line); }
  svg.chart rect { fill: var(--accent); }
  svg.chart rect.zero { fill: var(--line); }
  svg.chart rect.negative, svg.chart.bad rect { fill: var(--bad); }
  svg.chart.bad rect.zero { fill: var(--line); }
  /* The shared header does not wrap yet; on Home a phone gets the operator's name on a line of its own. */
  @media (max-width: 600px) { header { flex-wrap: wrap; } header .who { margin-left: 0; } }
  .axis { display: flex; justify-content: space-between; font-size: 12px; color: var(--muted); }
</style>
<h1>Home <span class="muted">· {{figures["date"]}} · times in {{figures["timeZone"]}}</span></h1>

% def chart(name, label, description, drawn, currency=None, bad=False):
  % ident = "chart-" + name
  <svg class="chart{{' bad' if bad else ''}}" id="{{ident}}" data-chart="{{name}}" data-currency="{{currency or ''}}" viewBox="0 0 {{drawn['width']}} {{drawn['height']}}" preserveAspectRatio="none" role="img" aria-labelledby="{{ident}}-title {{ident}}-desc">
    <title id="{{ident}}-title">{{label}}</title>
    <desc id="{{ident}}-desc">{{description}}, one bar per day from {{drawn["first"]}} to {{drawn["last"]}}.</desc>
    % for point in drawn["points"]:
    <rect class="point{{' zero' if point['zero'] else ''}}{{' negative' if point['negative'] else ''}}" x="{{point['x']}}" y="{{point['y']}}" width="{{point['w']}}" height="{{point['h']}}" data-day="{{point['day']}}" data-value="{{point['value']}}"{{!''.join(' data-%s="%d"' % (key, value) for key, value in point['data'].items())}}><title>{{point["title"]}}</title></rect>
    % end
  </svg>
  <div class="axis" aria-hidden="true"><span>{{drawn["first"]}}</span><span>{{drawn["last"]}}</span></div>
% end

<section aria-labelledby="needs-you-title">
  <h2 id="needs-you-title">Needs you</h2>
  % if not needs:
  <p class="muted">Nothing here needs a permission this account has.</p>
  % end
  <ul class="needs" id="needs-you">
    % for need in needs:
    <li class="{{'waiting' if need['count'] else ''}}" data-need="{{need['key']}}" data-count="{{need['count']}}">
      <a href="{{need['href']}}"><span class="figure">{{need["count"]}}</span>{{need["label"]}}</a>
    </li>
    % end
  </ul>
</section>

<h2>The last 30 days</h2>
<div class="charts">
  <div class="panel-box" id="revenue">
    <strong>Revenue</strong>
    % if figures["revenue"] is None:
    <p class="muted">Needs the payments.read permission.</p>
    % else:
    <div class="numbers">
    % for label, key in (("today", "today"), ("this month", "month")):
    <p><span class="muted">{{label}}</span><br>
      % if not figures["revenue"][key]:
      <span class="figure">–</span>
      % end
      % for row in figures["revenue"][key]:
      <span class="figure" data-currency="{{row["currency"]}}" title="{{row["currency"]}}">{{money_words(row["amountMinor"], row["currency"])}}</span><br>
      % end
    </p>
    % end
    </div>
    % if not charts["revenue"]:
    <p class="muted">No revenue in the last 30 days.</p>
    % end
    % for series in charts["revenue"]:
    % name = words.currency_name(series["currency"])
    <h3 class="muted" style="font-size:13px;margin:10px 0 0" title="{{series['currency']}}">{{name}}: <span data-total="{{series['total']}}">{{money_words(series["total"], series["currency"])}}</span> in 30 days</h3>
    % chart("revenue-" + series["currency"], "Revenue per day in " + name, "Net revenue in " + name + " per day, from the ledger", series["chart"], currency=series["currency"])
    % end
    <p class="muted">Net, per currency, from the ledger's revenue account: wallet top-ups count when they are spent, refunds are taken off.</p>
    % end
  </div>

  <div class="panel-box" id="customers">
    <strong>Customers</strong>
    % if figures["customers"] is None:
    <p class="muted">Needs the subscriptions.read permission.</p>
    % else:
    <div class="numbers">
      <p><span class="muted">new today</span><br><span class="figure">{{figures["customers"]["newToday"]}}</span></p>
      <p><span class="muted">new this month</span><br><span class="figure">{{figures["customers"]["newThisMonth"]}}</span></p>
      <p><span class="muted">new in 30 days</span><br><span class="figure" id="new-in-30-days">{{charts["customers"]["total"]}}</span></p>
    </div>
    % chart("new-customers", "New customers per day", "Customers who came to the shop per day", charts["customers"]["chart"])
    <p><a href="/panel/customers">Find a customer →</a></p>
    % end
  </div>

  <div class="panel-box" id="subscriptions">
    <strong>Active subscriptions</strong>
    % if figures["subscriptions"] is None:
    <p class="muted">Needs the subscriptions.read permission.</p>
    % else:
    <div class="numbers">
      <p><span class="muted">active now</span><br><span class="figure" id="active-subscriptions">{{figures["subscriptions"]["active"]}}</span></p>
      % without_access = figures["subscriptions"]["withoutAccessIds"]
      <p id="without-access"><span class="muted">paid, without access (re-provision from the subscription's page)</span><br>
        <span class="figure" style="{{'color:var(--bad)' if without_access else ''}}">{{figures["subscriptions"]["withoutAccess"]}}</span>
        % for subscription_id in without_access:
        <br><a href="{{subscription_page(subscription_id)}}">subscription {{subscription_id}}</a>
        % end
      </p>
    </div>
    % chart("active-subscriptions", "Active subscriptions per day", "Subscriptions with access at the end of each day (today: now)", charts["subscriptions"]["chart"])
    % end
  </div>

  <div class="panel-box" id="payments">
    <strong>Payment success</strong>
    % if charts["payments"] is None:
    <p class="muted">Needs the payments.read permission.</p>
    % else:
    % paid = charts["payments"]
    <div class="numbers">
      <p><span class="muted">succeeded in 30 days</span><br><span class="figure" id="payment-success-rate" data-succeeded="{{paid['succeeded']}}" data-ended="{{paid['ended']}}">{{"–" if paid["rate"] is None else "%d %%" % paid["rate"]}}</span></p>
      <p><span class="muted">payments that ended</span><br><span class="figure">{{paid["succeeded"]}} of {{paid["ended"]}}</span></p>
    </div>
    % chart("payment-success", "Payment success rate per day", "Percent of the payments started that day that succeeded, of those that ended (succeeded, cancelled, failed or expired)", paid["chart"])
    % end
  </div>

  <div class="panel-box" id="failing">
    <strong>Failing operations</strong>
    % if figures["operations"] is None:
    <p class="muted">Needs the system.read permission.</p>
    % else:
    <div class="numbers">
      <p><span class="muted">failed (need an operator)</span><br><a class="figure" href="/panel/system/operations?status=failed">{{figures["operations"]["failed"]}}</a></p>
      <p><span class="muted">retrying by themselves</span><br><a class="figure" href="/panel/system/operations?status=retrying">{{figures["operations"]["retrying"]}}</a></p>
    </div>
    % chart("failing-operations", "Failing operations per day", "Operations on the panel that are failed or retrying now, by the day they were queued", charts["operations"]["chart"], bad=True)
    % end
  </div>

  <div class="panel-box" id="queue-health">
    <strong>Background jobs</strong>
    % if figures["queue"] is None:
    <p class="muted">Needs the system.read permission.</p>
    % else:
    % queue = figures["queue"]
    % if queue["maintenance"]:
    <p style="color:var(--bad)"><strong>Maintenance mode is on</strong>: fulfillment and purchases are held.</p>
    % end
    <table>
      % for label, key in (("waiting to run", "available"), ("running", "running"), ("to be retried", "retryable"), ("scheduled", "scheduled"), ("failed jobs", "deadLetters"), ("events waiting to be sent", "outboxPending")):
      <tr><td>{{label}}</td><td>{{queue[key]}}</td></tr>
      % end
    </table>
    <p><a href="/panel/system/queue">Queue →</a></p>
    % end
  </div>
</div>
