"""Webhooks (issue 35 §2, docs/lms.md "Webhook"): a key's webhook_url receives each server-side
check result, signed, from a durable outbox, retried with backoff, with an Idempotency-Key that
stays the same. The receiver is a real HTTP server on loopback (the standard library's) that
verifies every delivery with another JOSE library (PyJWT) against the server's JWKS fetched over
HTTP. Loopback is reached only because the key's operator rule (webhook_allow) opens it; without
that rule the delivery is refused before any connection and the server still answers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.support.live_server import LiveServer, live_server, make_config, wait_until
from tests.support.redis_process import RedisProcess
from wasm_runner.scaleout.state import SharedState
from wasm_runner.settings import ApiKey, ConfigError, hash_key, load_config
from wasm_runner.outbox import RedisStore
from wasm_runner.webhooks import Delivery, WebhookRefused, Webhooks, WebhookSender

ISSUER = "wasm-runner-webhook-test"
HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"
HOOKED_KEY, DOWN_KEY, CLOSED_KEY, PRIVATE_KEY = "hooked-key", "down-key", "closed-key", "private-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """The platform's backend: verifies each delivery's token (PyJWT, the server's JWKS over
    HTTP), keeps each Idempotency-Key once, records what it got."""

    def __init__(self, port: int, jwks_url: str, audience: str) -> None:
        self.port, self.jwks = port, jwt.PyJWKClient(jwks_url, cache_keys=False)
        self.audience = audience
        self.seen: dict[str, dict[str, Any]] = {}  # idempotency key -> verified claims
        self.requests: list[str] = []  # every idempotency key received, repeats too
        self.httpd: ThreadingHTTPServer | None = None

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                token = body["result_token"]
                signing = receiver.jwks.get_signing_key_from_jwt(token)
                claims = jwt.decode(token, signing.key, algorithms=["RS256"], audience=receiver.audience,
                                    issuer=ISSUER)
                receiver.requests.append(key)
                receiver.seen.setdefault(key, {**claims, "_body": body})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {"hooked": free_port(), "down": free_port(), "closed": free_port()}


@pytest.fixture(scope="module")
def hooked(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory, ports: dict[str, int]) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("webhooks")
    keys = (
        ApiKey("hooked", hash_key(HOOKED_KEY), rate="10000/minute", webhook_url=f"http://127.0.0.1:{ports['hooked']}/hook",
               webhook_allow=("127.0.0.1",)),
        ApiKey("down", hash_key(DOWN_KEY), rate="10000/minute", webhook_url=f"http://127.0.0.1:{ports['down']}/hook",
               webhook_allow=("127.0.0.0/8",)),
        # loopback without the operator's rule: refused
        ApiKey("closed", hash_key(CLOSED_KEY), rate="10000/minute", webhook_url=f"http://127.0.0.1:{ports['closed']}/h"),
        # a private address without the rule: refused before any connection
        ApiKey("private", hash_key(PRIVATE_KEY), rate="10000/minute", webhook_url="https://10.11.12.13/hook"),
    )
    config = make_config(tmp, api_keys=keys, result_issuer=ISSUER, webhook_outbox_dir=tmp / "outbox",
                         webhook_retry_seconds=0.2)
    with live_server(config) as live:
        yield live


def check(server: LiveServer, key: str) -> dict[str, Any]:
    with server.client(key) as api:
        r = api.post("/api/exercises/greet/check", json={"code": HALF})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def audit(server: LiveServer) -> list[dict[str, Any]]:
    path = server.config.audit_log
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(server: LiveServer, tenant: str, event: str) -> list[dict[str, Any]]:
    return [e for e in audit(server) if e.get("event") == event and e.get("tenant") == tenant]


def outbox_files(server: LiveServer) -> list[Path]:
    folder = server.config.webhook_outbox_dir
    assert folder is not None
    return [*folder.glob("*.json"), *folder.glob("working/*.json")]  # waiting or being sent


def test_each_check_result_reaches_the_webhook_signed(hooked: LiveServer, ports: dict[str, int]) -> None:
    receiver = Receiver(ports["hooked"], hooked.url + "/.well-known/jwks.json", "hooked")
    receiver.start()
    try:
        first, second = check(hooked, HOOKED_KEY), check(hooked, HOOKED_KEY)
        assert wait_until(lambda: len(receiver.seen) == 2, timeout=60), receiver.requests
    finally:
        receiver.stop()
    got = sorted(receiver.seen.values(), key=lambda c: c["_body"]["result_token"] != first["result_token"])
    assert [c["_body"]["result_token"] for c in got] == [first["result_token"], second["result_token"]]
    for claims in got:  # what the receiver verified: the result the student got
        assert (claims["exercise"], claims["passed"], claims["total"], claims["score"]) == ("greet", 1, 2, 0.5)
        assert claims["aud"] == "hooked" and claims["_body"]["event"] == "check.result"
    delivered = events(hooked, "hooked", "webhook_delivered")
    assert sorted(e["delivery"] for e in delivered) == sorted(receiver.seen)
    assert all(e["host"] == f"127.0.0.1:{ports['hooked']}" and e["status"] == "204" for e in delivered)
    text = hooked.config.audit_log.read_text()  # type: ignore[union-attr]
    assert first["result_token"] not in text and first["result_token"].split(".")[2] not in text


def test_a_receiver_down_then_up_gets_the_result_once(hooked: LiveServer, ports: dict[str, int]) -> None:
    report = check(hooked, DOWN_KEY)  # answers at once: the receiver is down
    assert report["result_token"]
    assert wait_until(lambda: len(events(hooked, "down", "webhook_failed")) >= 2, timeout=60)
    receiver = Receiver(ports["down"], hooked.url + "/.well-known/jwks.json", "down")
    receiver.start()
    try:
        assert wait_until(lambda: events(hooked, "down", "webhook_delivered"), timeout=60)
        assert wait_until(lambda: not outbox_files(hooked), timeout=30)  # nothing left to send again
    finally:
        receiver.stop()
    failed = events(hooked, "down", "webhook_failed")
    delivered = events(hooked, "down", "webhook_delivered")
    assert len(delivered) == 1 and len(receiver.requests) == 1
    key = receiver.requests[0]  # the same Idempotency-Key on every attempt
    assert {e["delivery"] for e in failed} == {key} == {delivered[0]["delivery"]}
    assert int(delivered[0]["attempt"]) == len(failed) + 1
    assert "could not be reached" in failed[0]["reason"]
    assert receiver.seen[key]["_body"]["result_token"] == report["result_token"]


@pytest.mark.parametrize("key, tenant, reason", [
    (CLOSED_KEY, "closed", "127.0.0.1, a loopback, private or reserved address not in the key's webhook_allow"),
    (PRIVATE_KEY, "private", "10.11.12.13, a loopback, private or reserved address not in the key's webhook_allow"),
])
def test_a_target_the_rules_do_not_open_is_refused(hooked: LiveServer, ports: dict[str, int], key: str,
                                                    tenant: str, reason: str) -> None:
    receiver = Receiver(ports["closed"], hooked.url + "/.well-known/jwks.json", "closed")
    receiver.start()  # listening: only the rule keeps the delivery away
    try:
        report = check(hooked, key)
        assert report["passed_count"] == 1  # the student's check is unaffected
        assert wait_until(lambda: events(hooked, tenant, "webhook_refused"), timeout=60)
    finally:
        receiver.stop()
    refused = events(hooked, tenant, "webhook_refused")
    assert len(refused) == 1 and reason in refused[0]["reason"]
    assert receiver.requests == [] and not events(hooked, tenant, "webhook_delivered")
    assert httpx.get(hooked.url + "/healthz").status_code == 200  # and the server still answers
    assert check(hooked, key)["total"] == 2


def test_names_are_checked_by_the_address_they_resolve_to() -> None:
    asyncio.run(names_are_checked())


async def names_are_checked() -> None:
    """A name is resolved once and judged by its address (an injected resolver: no lookup, and
    nothing is sent: a refusal comes before any connection, ``target`` never connects)."""
    sender = WebhookSender(resolver=lambda host, port: ["192.168.1.20"])
    delivery = Delivery(id="x" * 32, key="k", url="https://lms.example/hook", body={})
    with pytest.raises(WebhookRefused, match="lms.example resolves to 192.168.1.20"):
        await sender.send(delivery, ())
    public = WebhookSender(resolver=lambda host, port: ["93.184.216.34"])
    with pytest.raises(WebhookRefused, match="http:// and its address 93.184.216.34 is not in"):
        await public.target("http://lms.example/hook", ())
    url, host, sni = await public.target("https://lms.example:8443/hook?x=1", ())  # nothing sent
    assert (url, host, sni) == ("https://93.184.216.34:8443/hook?x=1", "lms.example:8443", "lms.example")


@pytest.mark.parametrize("settings, error", [
    ({"webhook_url": "ftp://lms.example/x"}, "webhook_url must be an http:// or https:// URL"),
    ({"webhook_url": "https://user:pw@lms.example/x"}, "without credentials"),
    ({"webhook_url": "https://lms.example/x", "webhook_allow": ("localhost",)}, "webhook_allow takes addresses"),
    ({"webhook_allow": ("127.0.0.1",)}, "webhook_allow without a webhook_url"),
])
def test_bad_webhook_settings_are_refused_plainly(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        ApiKey("k", hash_key("k"), **settings).check({})


DOCS = Path(__file__).resolve().parents[2] / "docs" / "lms.md"
WEB = Path(__file__).resolve().parents[2] / "web"


def snippet(language: str, server: LiveServer) -> str:
    """docs/lms.md's verification snippet in ``language``, pointed at ``server``."""
    text = DOCS.read_text()
    code = text.split(f"```{language}\n", 1)[1].split("```", 1)[0]
    assert 'RUNNER = "https://runner.example.org"' in code and 'ISSUER = "https://runner.example.org"' in code
    return (code.replace('RUNNER = "https://runner.example.org"', f'RUNNER = "{server.url}"')
            .replace('ISSUER = "https://runner.example.org"', f'ISSUER = "{ISSUER}"'))


def test_the_docs_python_snippet_verifies_a_real_token(hooked: LiveServer) -> None:
    report = check(hooked, HOOKED_KEY)
    code = snippet("python", hooked).replace('key_name: str = "course-site"', 'key_name: str = "hooked"')
    scope: dict[str, Any] = {"result": report, "print": lambda *a: None}
    exec(compile(code, "docs/lms.md", "exec"), scope)  # noqa: S102 - our own docs, run as written
    assert scope["claims"]["exercise"] == "greet" and scope["claims"]["score"] == 0.5


def test_the_docs_javascript_snippet_verifies_a_real_token_with_jose(hooked: LiveServer) -> None:
    token = check(hooked, HOOKED_KEY)["result_token"]
    head, body, sig = token.split(".")
    forged = f"{head}.{body[:-4]}AAAA.{sig}"
    program = snippet("js", hooked) + """
for (const token of JSON.parse(process.env.TOKENS)) {
  try { console.log(JSON.stringify(await verify(token, "hooked"))); }
  catch (error) { console.log(JSON.stringify({ refused: error.code })); }
}
"""
    done = subprocess.run(["node", "--input-type=module"], input=program, cwd=WEB, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TOKENS": json.dumps([token, forged])})
    assert done.returncode == 0, done.stderr
    good, bad = (json.loads(line) for line in done.stdout.splitlines())
    assert (good["exercise"], good["score"], good["aud"], good["iss"]) == ("greet", 0.5, "hooked", ISSUER)
    assert bad["refused"] in ("ERR_JWS_SIGNATURE_VERIFICATION_FAILED", "ERR_JWS_INVALID", "ERR_JWT_INVALID")


def test_a_waiting_delivery_survives_a_restart(warm_sandbox: None, tmp_path: Path) -> None:
    """The outbox is durable: a server stopped while its receiver is down, started again on the
    same outbox folder, delivers the result once the receiver is up."""
    port = free_port()
    keys = (ApiKey("restart", hash_key("restart-key"), webhook_url=f"http://127.0.0.1:{port}/hook",
                   webhook_allow=("127.0.0.1",)),)
    config = make_config(tmp_path, api_keys=keys, result_issuer=ISSUER, webhook_outbox_dir=tmp_path / "outbox",
                         webhook_retry_seconds=0.2)
    with live_server(config) as first:
        token = check(first, "restart-key")["result_token"]
        assert wait_until(lambda: events(first, "restart", "webhook_failed"), timeout=60)
    assert len(outbox_files(first)) == 1  # waiting on disk
    with live_server(config) as second:
        receiver = Receiver(port, second.url + "/.well-known/jwks.json", "restart")
        receiver.start()
        try:
            assert wait_until(lambda: events(second, "restart", "webhook_delivered"), timeout=60)
            assert wait_until(lambda: not outbox_files(second), timeout=30)
        finally:
            receiver.stop()
    assert len(receiver.requests) == 1
    assert next(iter(receiver.seen.values()))["_body"]["result_token"] == token


def test_two_replicas_on_one_redis_outbox_deliver_once(redis_server: RedisProcess, tmp_path: Path) -> None:
    """Two replicas' dispatchers share the Redis outbox and race for the same due deliveries:
    each result reaches the receiver once."""
    port = free_port()
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(self.headers["Idempotency-Key"])
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    rule = ApiKey("cluster", hash_key("c"), webhook_url=f"http://127.0.0.1:{port}/hook", webhook_allow=("127.0.0.1",))
    lines: list[tuple[str, dict[str, str]]] = []

    async def run() -> list[str]:
        prefix = f"webhook-replicas-{time.time_ns()}:"
        replicas = [SharedState(redis_server.url, secret="s" * 32, key_prefix=prefix) for _ in range(2)]
        for shared in replicas:
            await shared.start()
        try:
            hooks = [Webhooks(RedisStore(shared, "webhook"), {"cluster": rule}, lambda e, **f: lines.append((e, f)))
                     for shared in replicas]
            ids = [await hooks[i % 2].enqueue("cluster", f"token-{i}", "greet") for i in range(6)]
            for _ in range(3):
                await asyncio.gather(*(h.outbox.deliver_due() for h in hooks))
            return [i for i in ids if i is not None]
        finally:
            for shared in replicas:
                await shared.close()

    try:
        ids = asyncio.run(run())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert sorted(received) == sorted(ids) and len(ids) == 6
    assert sorted(f["delivery"] for e, f in lines if e == "webhook_delivered") == sorted(ids)


def test_the_webhook_settings_from_the_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text(f'[server]\nwebhook_retry_seconds = 2.5\nwebhook_max_attempts = 3\nwebhook_outbox_dir = "{tmp_path}"\n'
                    '[[api_keys]]\nname = "course"\nkey = "course-key"\n'
                    'webhook_url = "https://lms.example/results"\nwebhook_allow = ["10.0.0.0/8"]\n')
    config = load_config(path, env={})
    (key,) = config.api_keys
    assert (key.webhook_url, key.webhook_allow) == ("https://lms.example/results", ("10.0.0.0/8",))
    assert (config.webhook_retry_seconds, config.webhook_max_attempts, config.webhook_outbox_dir) == (2.5, 3, tmp_path)
    path.write_text('[[api_keys]]\nname = "course"\nkey = "k"\nwebhook_allow = "10.0.0.1"\n')
    with pytest.raises(ConfigError, match="webhook_allow must be a list of addresses"):
        load_config(path, env={})
    path.write_text('[server]\nwebhook_max_attempts = 0\n[[api_keys]]\nname = "c"\nkey = "k"\n')
    with pytest.raises(ConfigError, match="webhook_max_attempts must be a whole number from 1 to 100"):
        load_config(path, env={})


def test_a_server_with_redis_url_delivers_from_the_redis_outbox(warm_sandbox: None, tmp_path: Path,
                                                                  redis_server: RedisProcess) -> None:
    port = free_port()
    keys = (ApiKey("clustered", hash_key("clustered-key"), webhook_url=f"http://127.0.0.1:{port}/hook",
                   webhook_allow=("127.0.0.1",)),)
    config = make_config(tmp_path, api_keys=keys, result_issuer=ISSUER, redis_url=redis_server.url,
                         cluster_secret="c" * 32, advertise_url="http://127.0.0.1:9", webhook_retry_seconds=0.2)
    with live_server(config) as live:
        assert isinstance(live.app.state.service.webhooks.outbox.store, RedisStore)  # type: ignore[attr-defined]
        token = check(live, "clustered-key")["result_token"]
        assert wait_until(lambda: events(live, "clustered", "webhook_failed"), timeout=60)  # receiver down
        receiver = Receiver(port, live.url + "/.well-known/jwks.json", "clustered")
        receiver.start()
        try:
            assert wait_until(lambda: events(live, "clustered", "webhook_delivered"), timeout=60)
        finally:
            receiver.stop()
    assert len(receiver.requests) == 1 and set(receiver.requests) == set(receiver.seen)
    assert [c["_body"]["result_token"] for c in receiver.seen.values()] == [token]
