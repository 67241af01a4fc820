"""``POST /api/run`` end to end: real uvicorn, real wasmtime guests."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from tests.support.live_server import KEY, LIMITED_KEY, STUDENT_KEY, LiveServer, b64, wait_until

from wasm_runner.result import RESULT_JSON_SCHEMA


def test_run_returns_the_result_object(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": "print(input().upper())", "stdin": "hello\n"})
    assert r.status_code == 200
    body = r.json()
    assert set(RESULT_JSON_SCHEMA["required"]) <= set(body)
    assert body["status"] == "ok" and body["exit_code"] == 0
    assert body["stdout"] == "HELLO\n"
    assert body["runtime"]


def test_errors_and_limits_are_named(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": "1/0"}).json()
    assert r["status"] == "error" and "ZeroDivisionError" in r["stderr"]
    r = api.post("/api/run", json={"code": "while True: pass", "limits": {"cpu_seconds": 0.3}})
    assert r.status_code == 200
    assert r.json()["status"] == "cpu_limit" and r.json()["limit"] == "cpu"
    assert api.get("/healthz").json()["status"] == "ok"


def test_profile_limits_only_tighten(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": "pass", "limits": {"cpu_seconds": 5}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_limits"
    assert "only tighten" in r.json()["error"]["message"]
    r = api.post(
        "/api/run", json={"code": "pass", "profile": "analyst", "limits": {"cpu_seconds": 5}}
    )
    assert r.status_code == 200 and r.json()["status"] == "ok"
    r = api.post("/api/run", json={"code": "pass", "profile": "gold"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_profile"


def test_key_restricted_to_a_profile(server: LiveServer) -> None:
    with server.client(STUDENT_KEY) as client:
        assert client.post("/api/run", json={"code": "pass"}).status_code == 200
        r = client.post("/api/run", json={"code": "pass", "profile": "analyst"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "profile_forbidden"


def test_files_in_and_out_base64(api: httpx.Client) -> None:
    code = (
        "rows = open('in.csv').read().splitlines()\n"
        "open('/out/report.txt', 'w').write(f'{len(rows)} rows')\n"
        "print(rows[0])"
    )
    r = api.post(
        "/api/run",
        json={"code": code, "files": [{"name": "in.csv", "content_base64": b64(b"a,b\n1,2\n")}]},
    ).json()
    assert r["status"] == "ok" and r["stdout"] == "a,b\n"
    (report,) = r["files"]
    assert report["path"] == "/out/report.txt"
    assert report["content_base64"] == b64(b"2 rows")


def test_files_out_as_short_lived_urls(api: httpx.Client, server: LiveServer) -> None:
    r = api.post(
        "/api/run",
        json={"code": "open('/out/a.bin','wb').write(bytes(range(256)))", "files_as": "url"},
    ).json()
    (entry,) = r["files"]
    assert "content_base64" not in entry and entry["url"].startswith("/api/files/")
    download = httpx.get(server.url + entry["url"])
    assert download.status_code == 200 and download.content == bytes(range(256))
    assert "attachment" in download.headers["content-disposition"]
    missing = httpx.get(server.url + "/api/files/not-a-token")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_file"


def test_analyst_sees_its_data_dir_read_only(api: httpx.Client, server: LiveServer) -> None:
    code = (
        "print(open('/data/numbers.csv').read().split()[1:])\n"
        "try:\n    open('/data/numbers.csv', 'w')\nexcept OSError as e:\n    print('refused')"
    )
    r = api.post("/api/run", json={"code": code, "profile": "analyst"}).json()
    assert r["status"] == "ok" and r["stdout"] == "['1', '2', '3']\nrefused\n"
    data = Path(server.config.profiles["analyst"].data_dir or "")
    assert (data / "numbers.csv").read_text() == "n\n1\n2\n3\n"


def test_hostile_code_leaves_the_host_alone(
    api: httpx.Client, server: LiveServer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    code = (
        "import os\n"
        f"for p in [{str(secret)!r}, '/etc/passwd', '../../secret.txt']:\n"
        "    try:\n        open(p).read(); print('READ', p)\n"
        "    except OSError:\n        print('no', p)\n"
        f"try:\n    open({str(secret)!r}, 'w').write('pwned')\n"
        "except OSError:\n    print('no write')\n"
        "print(sorted(k for k in os.environ if 'KEY' in k or 'SECRET' in k))"
    )
    r = api.post("/api/run", json={"code": code}).json()
    assert "READ" not in r["stdout"] and "no write" in r["stdout"]
    assert r["stdout"].rstrip().endswith("[]")
    assert secret.read_text() == "host secret"
    assert api.get("/healthz").status_code == 200


def test_auth_is_required(server: LiveServer) -> None:
    for key in (None, "wrong-key"):
        with server.client(key) as client:
            r = client.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
            assert r.headers["www-authenticate"].startswith("Bearer")


def test_rate_limit_gives_429_with_retry_after(server: LiveServer) -> None:
    with server.client(LIMITED_KEY) as client:
        codes = [client.post("/api/run", json={"code": "pass"}).status_code for _ in range(4)]
        assert codes[:3] == [200, 200, 200]
        r = client.post("/api/run", json={"code": "pass"})
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["retry-after"]) >= 1
    with server.client() as other:  # another key is unaffected
        assert other.post("/api/run", json={"code": "pass"}).status_code == 200


def test_every_bad_request_is_a_clear_4xx(api: httpx.Client, server: LiveServer) -> None:
    json_type = {"content-type": "application/json"}
    too_big = b"x" * (server.config.client_bounds.max_body_bytes + 1)
    nan_limits = json.dumps({"code": "x", "limits": {"cpu_seconds": float("nan")}})
    bad_b64 = [{"name": "a", "content_base64": "%%%"}]
    bad_name = [{"name": "/etc/x", "content_base64": ""}]
    cases = [
        (dict(content=b"{not json", headers=json_type), 400, "bad_json"),
        (dict(json={"code": "x", "colour": "red"}), 422, "invalid_request"),
        (dict(json={"code": "x", "limits": {"memory_mb": 10**9}}), 422, "invalid_request"),
        (dict(json={"code": "x", "limits": {"cpu_seconds": -1}}), 422, "invalid_request"),
        (dict(json={"code": "x", "files": bad_b64}), 422, "invalid_request"),
        (dict(json={"code": "x", "files": bad_name}), 422, "invalid_request"),
        (dict(json=["code"]), 422, "invalid_request"),
        (dict(content=b"code=1", headers={"content-type": "text/plain"}), 415, "unsupported_media_type"),  # noqa: E501
        (dict(content=too_big, headers=json_type), 413, "body_too_large"),
        (dict(content=nan_limits, headers=json_type), 400, "bad_json"),
    ]  # fmt: skip
    for kwargs, status, code in cases:
        r = api.post("/api/run", **kwargs)  # type: ignore[arg-type]
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), kwargs
        assert r.json()["error"]["message"]
    r = api.get("/api/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = api.get("/api/run")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    invalid = api.post("/api/run", json={"code": "print('a\\x00')\x00"})
    assert invalid.status_code == 200 and invalid.json()["status"] == "invalid_input"


def test_client_disconnect_frees_the_guest(server: LiveServer) -> None:
    body = json.dumps(
        {"code": "while True: pass", "profile": "analyst", "limits": {"wall_seconds": 100}}
    ).encode()
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(
            b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert wait_until(lambda: server.health()["running"] >= 1, timeout=30)
    # the socket is closed: the guest stops long before its 30 s CPU / 100 s wall limits
    assert wait_until(lambda: server.health()["running"] == 0, timeout=20)
    metrics = httpx.get(server.url + "/metrics").text
    assert 'wasm_runner_runs_total{kind="run",profile="analyst",status="cancelled"}' in metrics


def test_profile_pool_serves_warm_runs(api: httpx.Client) -> None:
    """The analyst profile keeps a warm instance with numpy and pandas imported: a run that
    imports them fits a CPU budget that a cold import alone would exceed."""
    import time

    code = "import numpy as np, pandas as pd\nprint(int(pd.Series(np.arange(5)).sum()))"
    deadline = time.monotonic() + 120
    while True:
        r = api.post("/api/run", json={"code": code, "profile": "analyst", "limits": {"cpu_seconds": 0.3}})
        assert r.status_code == 200
        body = r.json()
        if body["status"] == "ok" or time.monotonic() > deadline:
            break
        time.sleep(2)  # the pool is still warming its first slot
    assert body["status"] == "ok" and body["stdout"] == "10\n", body
