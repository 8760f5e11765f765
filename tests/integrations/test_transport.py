"""The Remnawave adapter's transport (integrations/transport.py) against real servers on 127.0.0.1:
kept-alive connections, when they are not reused, TLS verification and proxies."""

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from integrations import transport
from integrations.remnawave import MAX_BODY_BYTES, REMNAWAVE_UNAVAILABLE, RemnawaveClient, RemnawaveError

TOKEN = "transport-test-token-5d1e9b"
NOT_FOUND = json.dumps({"message": "User not found", "errorCode": "A063"}).encode()


class _Recorder(BaseHTTPRequestHandler):
    """Answers every lookup with the panel's 'user not found'; remembers who asked what, on which connection."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.server.seen.append((self.client_address[1], self.requestline))
        if self.path.endswith("/huge"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(2 * MAX_BODY_BYTES))
            self.end_headers()
            self.wfile.write(b" " * (2 * MAX_BODY_BYTES))
            return
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(NOT_FOUND)))
        if self.path.endswith("/closing"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(NOT_FOUND)

    def log_message(self, format, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that go away (refused TLS, closed early) are part of these tests


def _serve(tls_context=None):
    server = _Server(("127.0.0.1", 0), _Recorder)
    server.seen = []
    if tls_context is not None:
        server.socket = tls_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server():
    server = _serve()
    yield server
    server.shutdown()
    server.server_close()


def _client(server, scheme="http"):
    return RemnawaveClient(f"{scheme}://127.0.0.1:{server.server_address[1]}", TOKEN)


def _connections(server):
    return [port for port, _ in server.seen]


def test_calls_of_one_thread_share_one_kept_alive_connection(server):
    client = _client(server)
    for name in ("omniflow_a", "omniflow_b", "omniflow_c"):
        assert client.get_user_by_username(name) is None
    assert len(server.seen) == 3
    assert len(set(_connections(server))) == 1


def test_each_thread_has_its_own_connection(server):
    client = _client(server)
    barrier = threading.Barrier(2)

    def lookups():
        barrier.wait()
        for _ in range(3):
            client.get_user_by_username("omniflow_thread")

    threads = [threading.Thread(target=lookups) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.seen) == 6
    assert len(set(_connections(server))) == 2


def test_a_connection_idle_past_the_reuse_window_is_replaced(server, monkeypatch):
    monkeypatch.setattr(transport, "IDLE_REUSE_S", 0.0)
    client = _client(server)
    client.get_user_by_username("omniflow_a")
    client.get_user_by_username("omniflow_b")
    assert len(set(_connections(server))) == 2


def test_an_answer_that_closes_its_connection_is_followed_by_a_new_one(server):
    client = _client(server)
    assert client.get_user_by_username("closing") is None
    assert client.get_user_by_username("omniflow_after") is None
    assert len(set(_connections(server))) == 2


def test_an_answer_left_unread_closes_its_connection_and_the_next_call_works(server):
    client = _client(server)
    with pytest.raises(RemnawaveError) as refused:
        client.get_user_by_username("huge")
    assert refused.value.code == REMNAWAVE_UNAVAILABLE
    assert client.get_user_by_username("omniflow_after") is None
    assert len(set(_connections(server))) == 2


def test_a_panel_that_is_gone_is_unavailable():
    client = RemnawaveClient("http://127.0.0.1:9", TOKEN)  # nothing listens there
    with pytest.raises(RemnawaveError) as refused:
        client.get_user_by_username("omniflow_gone")
    assert refused.value.code == REMNAWAVE_UNAVAILABLE


# -- TLS ------------------------------------------------------------------------------------------


def _certificates(directory):
    """A CA and a certificate it signed for 127.0.0.1, as PEM files."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Omniflow test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_path, cert_path, key_path


@pytest.fixture
def tls_server(tmp_path):
    ca_path, cert_path, key_path = _certificates(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server = _serve(context)
    server.ca_path = ca_path
    yield server
    server.shutdown()
    server.server_close()


def test_tls_answers_are_trusted_through_the_configured_ca_bundle(tls_server, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls_server.ca_path))
    client = _client(tls_server, "https")
    assert client.get_user_by_username("omniflow_a") is None
    assert client.get_user_by_username("omniflow_b") is None
    assert len(set(_connections(tls_server))) == 1


def test_a_certificate_no_trusted_ca_signed_is_refused(tls_server, monkeypatch):
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    client = _client(tls_server, "https")
    with pytest.raises(RemnawaveError) as refused:
        client.get_user_by_username("omniflow_a")
    assert refused.value.code == REMNAWAVE_UNAVAILABLE
    assert tls_server.seen == []  # no request went out over the untrusted connection


# -- proxies ---------------------------------------------------------------------------------------


def test_a_proxy_from_the_environment_carries_the_call(server, monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    client = RemnawaveClient("http://panel.example.test", TOKEN)
    assert client.get_user_by_username("omniflow_proxied") is None
    [(_, request_line)] = server.seen
    assert request_line.startswith("GET http://panel.example.test/api/users/by-username/omniflow_proxied ")
