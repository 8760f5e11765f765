% rebase("layout", title="Sign in", operator=None, here="")
<h1>Sign in</h1>
<form id="login" style="display:grid; gap:10px; max-width:320px">
  <label>Username <input name="username" autocomplete="username" required></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit">Sign in</button>
  <div class="notice" id="login-error" hidden></div>
</form>
<script nonce="{{nonce}}">
  // A browser drops a Secure cookie on a plain-http page (localhost aside): the
  // sign-in succeeds and the next page finds no session. Ask for the session
  // before leaving, and say why when the cookie did not stick.
  const COOKIE_DROPPED = {{!cookie_dropped}};
  document.getElementById("login").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    const box = document.getElementById("login-error");
    const answer = await fetch("/v1/panel/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username: form.username.value, password: form.password.value }),
    });
    if (answer.ok) {
      const session = await fetch("/v1/panel/session");
      if (session.ok) { location.href = "/panel"; return; }
      box.textContent = COOKIE_DROPPED;
    } else if (answer.status === 401) {
      box.textContent = "Unknown username or wrong password.";
    } else {
      const problem = await answer.json().catch(() => ({}));
      box.textContent = problem.detail || "Sign-in failed.";
    }
    box.hidden = false;
  });
</script>
