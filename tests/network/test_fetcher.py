"""``RunNetwork`` on the host alone (no guest): https goes to the checked address with the name in
TLS's SNI and verified against the certificate (a self-signed one for the name is refused, and
nothing is sent over it), and the host's proxy settings are not used."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.loopback_api import loopback_api
from wasm_runner.network import NetworkRefused, NetworkRule, RunNetwork


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, list[str], list[str]]]:
    """An https server on 127.0.0.1 with a self-signed certificate for api.test: its port, the
    server names the clients asked for (SNI), the requests that got through."""
    names: list[str] = []
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            requests.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed(tmp_path, "api.test"))
    context.sni_callback = lambda sock, name, ctx: names.append(name) and None  # type: ignore[func-returns-value]

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # the client refusing the certificate

    server = Server(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], names, requests
    finally:
        server.shutdown()
        server.server_close()


def test_https_checks_the_certificate_of_the_name(tls_server: tuple[int, list[str], list[str]]) -> None:
    port, names, requests = tls_server
    rule = NetworkRule.from_table("tls", {"destinations": [f"https://api.test:{port}"], "addresses": ["127.0.0.1"]})
    network = RunNetwork([rule], resolver=lambda host, p: ["127.0.0.1"])
    with pytest.raises(NetworkRefused, match=r"the request to api.test failed \(ConnectError: .*CERTIFICATE_VERIFY"):
        asyncio.run(network.fetch("GET", f"https://api.test:{port}/secret", [], b"", time.monotonic() + 30))
    assert names == ["api.test"]  # the name went in SNI, the checked address was connected to
    assert requests == []  # nothing was sent over a connection whose certificate failed
    assert [(r.outcome, r.address) for r in network.records] == [("failed", "127.0.0.1")]


def test_the_hosts_proxy_settings_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    with loopback_api() as api, loopback_api() as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        network = RunNetwork([NetworkRule.from_table("api", {"destinations": [f"http://127.0.0.1:{api.port}"]})])
        answer = asyncio.run(network.fetch("GET", api.url("/data.json"), [("Cookie", "mine=1")], b"",
                                           time.monotonic() + 30))
        assert answer["status"] == 200 and answer["body"] == b'{"answer": 42, "items": [1, 2, 3]}'
        assert proxy.log == [] and api.paths() == ["/data.json"]
        headers = api.log[0][2]
        assert headers.get("cookie") == "mine=1" and "user-agent" not in headers and "proxy-authorization" not in headers
