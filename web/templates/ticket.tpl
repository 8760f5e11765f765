% rebase("layout", title="Ticket " + str(ticket.id), operator=operator, here="/panel/support")
<h1>Ticket {{ticket.id}} <span class="muted">· <span class="status-{{ticket.status}}" id="ticket-status">{{ticket.status}}</span></span></h1>
<p class="muted">customer <a href="{{customer_page(ticket.customer_id)}}">{{ticket.customer_id}}</a> · opened {{iso(ticket.created_at)}} · last activity {{iso(ticket.updated_at)}} · <a href="/panel/support?status={{ticket.status}}">{{ticket.status}} tickets</a></p>
<div id="messages">
% if not messages:
<div class="empty">No message.</div>
% end
% for message in messages:
<div class="message {{message.author}}" data-message="{{message.id}}">
  <strong>{{"operator " + (message.operator_username or "") if message.author == "operator" else "customer"}}</strong>
  <span class="muted">· {{iso(message.created_at)}}</span>
  % if message.author == "operator":
  <span class="muted">· to the chat: <span class="status-{{message.push_status}}">{{message.push_status or "–"}}</span>{{" " + iso(message.pushed_at) if message.pushed_at else ""}}</span>
  % end
  % if message.text:
  <p class="text">{{message.text}}</p>
  % end
  % for file in files.get(message.id, []):
  <div class="attachment" data-digest="{{file.digest}}">
    % if file.content_type in inline_types:
    <a href="{{attachment_url(file)}}"><img src="{{attachment_url(file)}}" alt="attachment {{file.digest[:12]}}" loading="lazy"></a>
    % end
    <span class="muted">{{file.content_type}} · {{file.size_bytes}} bytes · <span class="code">{{file.digest[:12]}}…</span> · kept until {{iso(file.expires_at)}} · <a href="{{attachment_url(file)}}">open</a></span>
  </div>
  % end
</div>
% end
</div>
% if can_reply:
<form class="stacked operator-change panel-box" id="reply">
  <strong>Reply</strong>
  <textarea name="text" data-field="text" rows="4" maxlength="{{max_text}}" required placeholder="the bot sends this to the customer's chat" aria-label="reply"></textarea>
  <div style="display:flex;gap:6px;align-items:center">
    <button type="submit" data-action="/v1/panel/support/tickets/{{ticket.id}}/replies">Send</button>
    <span class="error" style="color:var(--bad)"></span>
  </div>
</form>
% elif ticket.status == "closed":
<p class="muted">This ticket is closed: the customer's next message opens a new one.</p>
% end
