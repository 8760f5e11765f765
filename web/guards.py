"""What every request and answer of the web process share against the browser's attacks:
the Origin rule for changes made with the session cookie, and the security headers.

Origin: a state-changing request (POST, PUT, PATCH, DELETE) to the panel API
(/v1/panel/..., sign-in included) or carrying the session cookie must come
from the panel's own origin, or it is a 403 `cross_origin_refused` before any
route runs. Its `Origin` header names where it comes from, or, without one,
its `Referer`; a browser sends `Origin` with every cross-site POST (a form
too), and "null" (a sandboxed or opaque page) is refused. A request with
neither comes from no browser (a script, a server with the bearer token):
no browser can be made to send it, so it passes to the route and its own
authentication. The panel's own origin is the scheme and host the request
was made to (behind APP_TRUSTED_PROXY, as the proxy's X-Forwarded-Proto and
X-Forwarded-Host give them: web/app.py), and APP_PUBLIC_URL's. Sign-in
being checked too is what stops login CSRF: another site's page cannot sign
a visitor into an account of its choosing. (JSON bodies are read only with
Content-Type application/json: web/answers.py's json_body.)

Headers: every answer carries X-Content-Type-Options: nosniff,
Referrer-Policy: same-origin, X-Frame-Options: DENY, Cache-Control:
no-store (answers carry customers' names, wallets and support texts) and,
when session cookies are Secure (so the panel is served over https), HSTS.
A page gets a Content-Security-Policy whose scripts are only those carrying
this answer's nonce (web/pages.py's render hands it to the templates); any
other answer gets one that allows nothing. A route that sets its own
Cache-Control or Content-Security-Policy keeps it.
"""

import secrets
from urllib.parse import urlsplit

import bottle

from web import problems
from web.panel import SESSION_COOKIE

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PANEL_API = "/v1/panel/"
NONCE_KEY = "omniflow.script_nonce"
HSTS = "max-age=31536000"
NOTHING_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"
PAGE_POLICY = (
    "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
DEFAULT_PORTS = {"http": 80, "https": 443}


def script_nonce():
    """This answer's nonce for its inline scripts, made on first use."""
    environ = bottle.request.environ
    if NONCE_KEY not in environ:
        environ[NONCE_KEY] = secrets.token_urlsafe(18)
    return environ[NONCE_KEY]


def origin_of(url):
    """(scheme, host, port) of a URL or an Origin header's value, or None when it names no http(s) origin."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except (ValueError, AttributeError):
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def own_origins(public_url):
    environ = bottle.request.environ
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}"
    found = {origin_of(f"{environ.get('wsgi.url_scheme', 'http')}://{host}"), origin_of(public_url)}
    return found - {None}


def cross_origin(public_url):
    """Whether this request is a change that a page of another origin made in the browser."""
    request = bottle.request
    if request.method not in STATE_CHANGING:
        return False
    if not request.path.startswith(PANEL_API) and request.get_cookie(SESSION_COOKIE) is None:
        return False
    source = request.get_header("Origin")
    if source is None:
        source = request.get_header("Referer")
        if source is None:
            return False
    return origin_of(source) not in own_origins(public_url)


def secure_headers(hsts):
    response = bottle.response
    response.set_header("X-Content-Type-Options", "nosniff")
    response.set_header("Referrer-Policy", "same-origin")
    response.set_header("X-Frame-Options", "DENY")
    if "Cache-Control" not in response.headers:
        response.set_header("Cache-Control", "no-store")
    if "Content-Security-Policy" not in response.headers:
        page = response.content_type.startswith("text/html") and NONCE_KEY in bottle.request.environ
        policy = PAGE_POLICY.format(nonce=script_nonce()) if page else NOTHING_POLICY
        response.set_header("Content-Security-Policy", policy)
    if hsts:
        response.set_header("Strict-Transport-Security", HSTS)


def install(app, public_url="", hsts=True):
    """The Origin rule and the headers on every route of `app` (the process's whole application)."""

    def check_origin():
        if cross_origin(public_url):
            body = problems.problem(
                403,
                problems.CROSS_ORIGIN_REFUSED,
                "a change to the panel is accepted only from the panel's own pages (the request's Origin or "
                "Referer names another site)",
            )
            raise bottle.HTTPResponse(body, 403, headers=dict(bottle.response.headers))

    app.add_hook("before_request", check_origin)
    app.add_hook("after_request", lambda: secure_headers(hsts))
    # An unexpected error's answer replaces the headers the hook set: set them again on it.
    internal_error = app.error_handler[500]

    def on_internal_error(error):
        body = internal_error(error)
        secure_headers(hsts)
        return body

    app.error_handler[500] = on_internal_error
