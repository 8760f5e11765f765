"""A fake blocklist source: a real HTTP server answering a list of Telegram ids at /list, conditionally.

Each list it is given (`set_list`) is a new version with its own ETag and
Last-Modified; a GET whose If-None-Match or If-Modified-Since names the
current version is answered 304 with no body, otherwise 200 with the ids,
one per line. With a `token` it answers 401 to a request without
`Authorization: Bearer <token>`. Every request's conditional and
authorization headers are recorded (`requests`), so a test sees what the
refresh sent.

Faults, played in order, one per request (`script("500", None, …)`; None is
a normal answer): `"500"` answers 500, `"garbage"` answers 200 with a body
that is not a list, `"hold"` answers only after `hold_seconds` (longer than
the client waits: a timeout). `python -m fakes.blocklist_server 1 2 3
[--port N]` serves a fixed list for development.
"""

import argparse
import threading
from email.utils import formatdate

from fakes.http_server import ServedFake

LIST_PATH = "/list"
FIRST_VERSION_AT = 1_780_000_000  # Last-Modified of the first version; each later one is a second on
GARBAGE = b"<html><body>Service temporarily unavailable</body></html>\n"
FAULTS = ("500", "garbage", "hold")


class FakeBlocklist(ServedFake):
    """start() serves on a background thread; `url` is the list's address."""

    server_name = "FakeBlocklist"
    thread_name = "fake-blocklist"

    def __init__(self, ids=(), token=None, host="127.0.0.1", port=0, hold_seconds=2.0):
        self._init_served(host, port)
        self.token = token
        self.hold_seconds = hold_seconds
        self._lock = threading.Lock()
        self._version = 0
        self._script = []
        self.requests = []
        self.set_list(ids)

    @property
    def url(self):
        return self.base_url + LIST_PATH

    def set_list(self, ids, comment=None):
        """Serve these ids from now on, as a new version."""
        with self._lock:
            self._version += 1
            lines = ([f"# {comment}"] if comment else []) + [str(telegram_id) for telegram_id in ids]
            self._body = ("\n".join(lines) + "\n").encode()
            self.etag = f'"v{self._version}"'
            self.last_modified = formatdate(FIRST_VERSION_AT + self._version, usegmt=True)

    def script(self, *faults):
        """The next requests' faults, in order (None: answered normally)."""
        unknown = [fault for fault in faults if fault is not None and fault not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {FAULTS}")
        with self._lock:
            self._script.extend(faults)

    def _serve(self, handler):
        with self._lock:
            fault = self._script.pop(0) if self._script else None
            body, etag, last_modified = self._body, self.etag, self.last_modified
            self.requests.append(
                {
                    "path": handler.path,
                    "if_none_match": handler.headers.get("If-None-Match"),
                    "if_modified_since": handler.headers.get("If-Modified-Since"),
                    "authorization": handler.headers.get("Authorization"),
                }
            )
        if fault == "hold":
            self._stopping.wait(self.hold_seconds)
        if handler.path != LIST_PATH:
            return _answer(handler, 404, b"not found\n")
        if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
            return _answer(handler, 401, b"unauthorized\n")
        if fault == "500":
            return _answer(handler, 500, b"internal error\n")
        if fault == "garbage":
            return _answer(handler, 200, GARBAGE, content_type="text/html")
        validators = {"ETag": etag, "Last-Modified": last_modified}
        if handler.headers.get("If-None-Match") == etag or handler.headers.get("If-Modified-Since") == last_modified:
            return _answer(handler, 304, b"", validators)
        return _answer(handler, 200, body, validators)


def _answer(handler, status, body, headers=None, content_type="text/plain; charset=utf-8"):
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if status != 304:
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if body:
        handler.wfile.write(body)


def main(argv=None):
    parser = argparse.ArgumentParser(description="a fake blocklist source serving a fixed list of Telegram ids")
    parser.add_argument("ids", nargs="*", type=int)
    parser.add_argument("--port", type=int, default=3040)
    arguments = parser.parse_args(argv)
    fake = FakeBlocklist(arguments.ids, port=arguments.port).bind()
    print(f"serving {len(arguments.ids)} ids at {fake.url}", flush=True)
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass  # Ctrl-C ends it


if __name__ == "__main__":
    main()
