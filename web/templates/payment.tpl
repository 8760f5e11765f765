% rebase("layout", title="Payment " + str(intent.id), operator=operator, here="/panel/customers")
<h1>Payment {{intent.id}} <span class="muted">· <span data-provider="{{intent.provider}}">{{words.provider_name(intent.provider)}}</span> · <span class="status-{{intent.status}}" id="payment-status" data-status="{{intent.status}}" title="{{intent.status}}">{{words.payment_status(intent.status)}}</span></span></h1>
<p class="muted">
  order <a href="{{order_page(intent.order_id)}}">{{intent.order_id}}</a>
  · {{money(intent.amount_minor, intent.currency)}}
  · provider's id <span class="code">{{intent.provider_payment_id or "–"}}</span>
</p>
<p class="muted">created {{iso(intent.created_at)}} · updated {{iso(intent.updated_at)}} · last polled {{iso(intent.last_polled_at) or "–"}}</p>
<h2>Webhook deliveries</h2>
% if not deliveries:
<div class="empty">No webhook delivery for this payment.</div>
% else:
<table id="deliveries">
  <tr><th>delivery</th><th>provider's event</th><th>received</th><th>checked</th><th>processed</th><th>outcome</th></tr>
  % for event in deliveries:
  <tr>
    <td>{{event.id}}</td>
    <td class="code">{{event.provider_event_id or "–"}}</td>
    <td class="muted">{{iso(event.received_at)}}</td>
    % checked, holds = words.webhook_verdict(event)
    <td class="{{'muted' if holds is None else 'status-succeeded' if holds else 'status-failed'}}" data-verdict="{{event.verdict or ''}}">{{checked}}</td>
    <td class="muted">{{iso(event.processed_at) or "–"}}</td>
    % if words.webhook_outcome(event.outcome):
    <td data-outcome="{{event.outcome}}" title="{{event.outcome}}">{{words.webhook_outcome(event.outcome)}}</td>
    % else:
    <td>{{!explained(event.outcome, known_only=True)}}</td>
    % end
  </tr>
  % end
</table>
% end
<p class="muted">A delivery's body is kept for 30 days (a rejected one's first KiB, for 3 days) and never shown: it may carry card digits. YooKassa signs nothing: its notifications are checked by asking its API.</p>
