"""A real HTTP server on 127.0.0.1 that records the webhooks a fake provider delivers, and answers a chosen status."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self, status=200):
        self.status = status
        self.received = []  # (path, raw body, headers as a dict)
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.received.append((self.path, body, dict(self.headers.items())))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/webhooks/test"

    def bodies(self):
        with self._lock:
            return [body for _, body, _ in self.received]

    def last(self):
        """(body, headers) of the latest delivery."""
        with self._lock:
            _, body, headers = self.received[-1]
            return body, headers

    def wait_for(self, count, timeout=5.0):
        """Wait until `count` deliveries have arrived (some are sent after the API call's answer); return them."""
        deadline = time.monotonic() + timeout
        while len(self.bodies()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.bodies()
