% if not operations:
<div class="empty">No operations.</div>
% else:
<table class="operations">
  <tr><th>operation</th><th>kind</th><th>status</th><th>attempts</th><th>error</th><th>correlation</th><th>created</th></tr>
  % for op in operations:
  <tr data-operation="{{op.id}}">
    <td><a href="{{operation_page(op.id)}}">{{op.id}}</a></td>
    <td>{{op.operation}}</td>
    <td class="status-{{op.status}}">{{op.status}}</td>
    <td>{{op.attempt_count}}</td>
    <td>{{!explained(op.last_error_code)}}</td>
    <td class="code muted">{{!linked(op.correlation_id)}}</td>
    <td class="muted">{{iso(op.created_at)}}</td>
  </tr>
  % end
</table>
% end
