% rebase("layout", title=title, operator=operator, here="")
<h1>{{title}}</h1>
<p>{{detail}}</p>
