"""The HTTP plumbing every fake server shares: a threaded keep-alive server and its lifecycle.

The fakes (the panel, the payment providers, the Bot API, the webhook
receiver) are real HTTP servers on 127.0.0.1. Each one is a `ServedFake`: it
sets `server_name` and `thread_name`, implements `_serve(handler)` for every
request, and may extend `_release()` to wake what it holds (long polls,
held timeout-fault answers, timers) before the server shuts down.

Open connections are tracked so that stop() can close idle keep-alive
connections (each holds a thread) instead of waiting out their timeout, and a
client that gave up mid-answer is not an error worth a traceback.
"""

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def close_connection(connection):
    """Shut a socket down both ways; one already gone is fine."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # many concurrent clients connecting at once

    def __init__(self, address, fake, handler_class):
        self.fake = fake
        self.open_connections = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler_class)

    def handle_error(self, request, client_address):
        # A client that gave up (a timeout fault) or a socket closed on purpose is expected here.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def close_open_connections(self):
        with self.connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            close_connection(connection)


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real service behind a proxy
    sys_version = ""
    timeout = 60  # idle keep-alive connections end eventually
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    @property
    def server_version(self):
        return self.server.fake.server_name

    def parse_request(self):
        self.arrived = time.monotonic()  # the request line is in: a fake's latency counts from here
        return super().parse_request()

    def setup(self):
        super().setup()
        with self.server.connections_lock:
            self.server.open_connections.add(self.connection)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        finally:
            with self.server.connections_lock:
                self.server.open_connections.discard(self.connection)

    def do_GET(self):
        self.server.fake._serve(self)

    do_POST = do_PATCH = do_DELETE = do_PUT = do_GET

    def log_message(self, format, *args):
        pass  # quiet: tests read each fake's counters and transcripts


class ServedFake:
    """bind/start/serve_forever/stop for a fake; the subclass calls `_init_served` in its __init__."""

    server_name = "Fake"
    thread_name = "fake"
    handler_class = FakeHandler

    def _init_served(self, host, port):
        self.host = host
        self.port = port
        self._stopping = threading.Event()
        self._server = None
        self._thread = None

    def bind(self):
        """Open the listening socket (port 0 picks a free one); start() and serve_forever() call it."""
        if self._server is None:
            self._stopping.clear()
            self._server = FakeHTTPServer((self.host, self.port), self, self.handler_class)
            self.port = self._server.server_address[1]
        return self

    def start(self):
        """Serve on a background thread."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self.bind()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self):
        """Serve in the calling thread until interrupted (the CLI)."""
        self.bind()
        try:
            self._server.serve_forever(poll_interval=0.2)
        finally:
            self._release()
            self._close_server()

    def stop(self):
        if self._server is None:
            return
        self._release()
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._close_server()

    def _release(self):
        """Wake whatever a request is waiting on; subclasses add their own."""
        self._stopping.set()

    def _close_server(self):
        server, self._server = self._server, None
        if server is None:
            return
        server.close_open_connections()
        server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def base_url(self):
        return f"http://{self.host}:{self.port}"
