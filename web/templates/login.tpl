% rebase("layout", title="Sign in", operator=None, here="")
<h1>Sign in</h1>
<form id="login" style="display:grid; gap:10px; max-width:320px">
  <label>Username <input name="username" autocomplete="username" required></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit">Sign in</button>
  <div class="notice" id="login-error" hidden></div>
</form>
<script>
  document.getElementById("login").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    const answer = await fetch("/v1/panel/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username: form.username.value, password: form.password.value }),
    });
    if (answer.ok) { location.href = "/panel/system/jobs"; return; }
    const box = document.getElementById("login-error");
    box.textContent = answer.status === 401 ? "Unknown username or wrong password." : "Sign-in failed.";
    box.hidden = false;
  });
</script>
