% rebase("layout", title="Not allowed", operator=operator, here="")
<h1>Not allowed</h1>
<p>This page needs the <span class="code">{{permission}}</span> permission.</p>
