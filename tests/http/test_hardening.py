"""The pieces behind the attack suite, each on its own: settings, host names, JSON shape limits,
fair shares in admission and in the download store, log redaction, and DNS rebinding against a
``--no-auth`` server (real uvicorn on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import live_server, make_config
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import wasm_runner.http.cli as serve_cli
from wasm_runner.admission import Admission, Busy
from wasm_runner.settings import ConfigError, ServerConfig, load_config
from wasm_runner.downloads import DownloadStore
from wasm_runner.http.errors import ApiError
from wasm_runner.http.middleware import host_allowed
from wasm_runner.http.schemas import decode_json
from wasm_runner.http.serving import _RedactTokens, address_key


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("tenant_memory_share", 0, "tenant_memory_share must be a fraction"),
        ("download_tenant_share", 1.5, "download_tenant_share must be a fraction"),
        ("header_timeout_seconds", 0, "header_timeout_seconds must be a number of seconds"),
        ("max_header_bytes", 0, "max_header_bytes must be a whole number"),
        ("failed_auth_rate", "lots", "failed_auth_rate: rate 'lots'"),
        ("allowed_hosts", ("",), "allowed_hosts must be a list of host names"),
    ],
)
def test_bad_hardening_settings_are_refused_clearly(setting: str, value: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ServerConfig.from_keys(**{setting: value})


def test_a_profile_larger_than_one_keys_share_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="more than one key's share of the memory budget"):
        ServerConfig.from_keys(memory_budget_mb=1100)  # analyst: 1024 + 34 MB > 0.6 x 1100
    toml = tmp_path / "s.toml"
    toml.write_text('[server]\nallowed_hosts = ["runner.example.org"]\nmax_header_bytes = 8192\n')
    config = load_config(toml, env={"WASM_RUNNER_ALLOWED_HOSTS": "a.example,b.example"})
    bounds = config.client_bounds
    assert bounds.allowed_hosts == ("a.example", "b.example") and bounds.max_header_bytes == 8192


def test_host_names() -> None:
    allowed = ("localhost", "127.0.0.1", "::1", "*.course.example")
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST.", "a.course.example"):
        assert host_allowed(host, allowed), host
    for host in ("rebind.example", "", None, "127.0.0.1.rebind.example", "course.example", "[::2]"):
        assert not host_allowed(host, allowed), host
    assert host_allowed("anything.example", ("*",))
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff") == "2001:db8::/64"
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"


def test_json_shape_limits_come_before_parsing() -> None:
    assert decode_json(json.dumps({"code": "a, b, [c], {d}" * 10000})) == {
        "code": "a, b, [c], {d}" * 10000
    }  # brackets and commas inside strings do not count
    for body, code in (
        (b"[" + b"{}," * 40000 + b"{}]", "json_too_complex"),
        (b"[" * 40 + b"]" * 40, "json_too_deep"),
        (b'{"a": "unterminated', "bad_json"),
        (b"\xff", "bad_json"),
        (b'{"a": NaN}', "bad_json"),
    ):
        with pytest.raises(ApiError) as err:
            decode_json(body)
        assert err.value.code == code


def test_download_store_quota_per_tenant() -> None:
    store = DownloadStore(ttl=60, max_bytes=1000, tenant_bytes=400)
    alice = store.put("a", b"a" * 100, tenant="alice")
    bobs = [store.put("b", b"b" * 150, tenant="bob") for _ in range(10)]
    assert store.get(alice) is not None  # bob only ever evicted his own links
    assert store.held_by("bob") <= 400 and store.get(bobs[-1]) is not None
    assert store.put("big", b"x" * 401, tenant="carol") is None  # over any quota: no link
    # a full store: carol (holding less than bob) pushes out bob's oldest, never alice's
    for name in ("carol", "dave"):
        store.put("c", b"c" * 300, tenant=name)
    assert store.get(alice) is not None


def test_admission_fair_shares() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=1, max_queue=4, memory_budget_mb=1000, queue_timeout=5,
                        tenant_memory_mb=600, tenant_queue=2)  # fmt: skip
        session = adm.reserve("hog", 500, expires_in=lambda now: 1234.0)
        with pytest.raises(Busy) as refused:
            adm.reserve("hog", 200)
        assert refused.value.code == "tenant_memory" and refused.value.retry_after == 1234
        with pytest.raises(Busy) as refused:
            adm.reserve("other", 600)
        assert refused.value.code == "memory_budget" and refused.value.retry_after == 1234
        running = await adm.acquire("hog", 50, max_concurrent=4)  # nobody waits: over share ok
        hog_waits = asyncio.ensure_future(adm.acquire("hog", 150, max_concurrent=4))
        hog_waits2 = asyncio.ensure_future(adm.acquire("hog", 150, max_concurrent=4))
        await asyncio.sleep(0)
        with pytest.raises(Busy) as refused:  # its two queue places are taken
            await adm.acquire("hog", 100, max_concurrent=4)
        assert refused.value.code == "tenant_queue"
        other = asyncio.ensure_future(adm.acquire("other", 100, max_concurrent=4))
        await asyncio.sleep(0)
        running.release()  # hog's waiters are over its share while "other" waits: other first
        ticket = await asyncio.wait_for(other, 1)
        assert not hog_waits.done()
        ticket.release()
        (await asyncio.wait_for(hog_waits, 1)).release()  # nobody else waits: hog runs
        (await asyncio.wait_for(hog_waits2, 1)).release()
        session.release()
        assert adm.memory_mb == 0 and adm.running == 0

    asyncio.run(scenario())


def test_access_log_redacts_tokens_and_keys() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("1.2.3.4:5", "GET", "/api/files/SECRETtoken?api_key=KEY&x=1",
                                "1.1", 200), None)  # fmt: skip
    _RedactTokens().filter(record)
    line = record.getMessage()
    assert "SECRET" not in line and "KEY" not in line and "x=1" in line


def test_serve_on_every_address_needs_host_names(capsys: pytest.CaptureFixture[str]) -> None:
    env_free = ["--config", "/dev/null"]
    assert serve_cli.main([*env_free, "--host", "0.0.0.0"]) == 2
    assert "--allowed-host NAME" in capsys.readouterr().err


def test_dns_rebinding_against_a_no_auth_server(warm_sandbox: None, tmp_path: Path) -> None:
    with live_server(make_config(tmp_path, auth=False, api_keys=())) as server:
        port = server.url.rsplit(":", 1)[1]
        r = httpx.post(server.url + "/api/run", json={"code": "print(1)"},
                       headers={"Host": f"rebind.example:{port}"})  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"
        with pytest.raises(InvalidStatus) as refused:
            with connect(f"ws://127.0.0.1:{port}/api/run/ws", origin=f"http://rebind.example:{port}",  # type: ignore[arg-type]
                         additional_headers={"Host": f"rebind.example:{port}"}):  # fmt: skip
                pass
        assert refused.value.response.status_code == 400
        # the playground's own page (same origin, a configured host name) is served
        with connect(f"ws://127.0.0.1:{port}/api/run/ws", origin=f"http://127.0.0.1:{port}") as ws:  # type: ignore[arg-type]
            ws.send(json.dumps({"type": "run", "code": "print(6 * 7)"}))
            messages = [json.loads(ws.recv(timeout=60)) for _ in range(3)]
        assert any(m.get("data") == "42\n" for m in messages), messages
