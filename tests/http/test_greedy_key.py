"""A greedy key meets its paused-session budget (issue 38, part 3): a real uvicorn on 127.0.0.1,
real wasmtime instances, pausing on. With pausing, a new session pauses the key's least recently
used idle one, so without a bound a key could keep any number of sessions on disk. Two keys open
sessions in a loop (up to 10,000 tries, bounded in time): one with small sessions meets the count
budget (``session_paused_per_key``), one whose sessions hold incompressible data meets the byte
budget (``snapshot_key_bytes``): ``429 paused_sessions_budget`` naming it. Meanwhile a third key
opens, runs and resumes sessions, and none of its sessions is paused for them; the disk holds no
more than each key's budget plus its live sessions' snapshots (the documented slack)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from tests.support.live_server import live_server, make_config
from tests.support.live_server import session_cell as cell
from tests.support.live_server import session_state as state

from wasm_runner.settings import ApiKey, hash_key

PER_KEY = 4  # paused sessions one key may have
KEY_BYTES = 8 << 20  # a small session's snapshot is ~0.85 MiB: the count budget comes first
LIVE = 2  # each key's max_concurrent: its live sessions
KEYS = {"greedy": "greedy-key-0001", "hoarder": "hoarder-key-0001", "calm": "calm-key-0001"}
BLOB = "import random\nblob = random.randbytes(1_500_000)  # does not compress"


def _loop(api: httpx.Client, code: str | None, opened: list[str], refusals: list[httpx.Response],
          seconds: float = 40.0) -> int:  # fmt: skip
    """Open sessions until refused, then keep trying a little: up to 10,000 tries in all."""
    end, refused_at, tries = time.monotonic() + seconds, None, 0
    while tries < 10_000 and time.monotonic() < end:
        tries += 1
        r = api.post("/api/sessions", json={"profile": "quick"})
        if r.status_code == 201:
            assert refused_at is None, ("opened after a refusal", refusals[-1].text)  # no room appears
            opened.append(r.json()["id"])
            if code is not None:
                cell(api, opened[-1], code)
            continue
        refusals.append(r)
        refused_at = refused_at or time.monotonic()
        if time.monotonic() - refused_at > 2.0:
            break
    return tries


def test_a_greedy_key_meets_its_paused_budget_and_others_go_on(tmp_path: Path) -> None:
    keys = tuple(ApiKey(name, hash_key(key), rate="1000000/minute", max_concurrent=LIVE) for name, key in KEYS.items())
    config = make_config(
        tmp_path, api_keys=keys, max_sessions=3 * LIVE, session_pause_seconds=600.0, memory_budget_mb=4096,
        tenant_memory_share=1.0, snapshot_key_bytes=KEY_BYTES, session_paused_per_key=PER_KEY,
    )  # fmt: skip
    store = tmp_path / "paused-sessions"
    with live_server(config) as live:

        def client(name: str) -> httpx.Client:
            return httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {KEYS[name]}"},
                                timeout=60, trust_env=False)  # fmt: skip

        with client("calm") as calm:  # before: two live sessions with state
            mine = [calm.post("/api/sessions", json={"profile": "quick"}).json()["id"] for _ in range(2)]
            for i, sid in enumerate(mine):
                cell(calm, sid, f"v = {i}")
        got: dict[str, tuple[list[str], list[httpx.Response], int]] = {}

        def greedy(name: str, code: str | None) -> None:
            opened: list[str] = []
            refusals: list[httpx.Response] = []
            with client(name) as api:
                tries = _loop(api, code, opened, refusals)
            got[name] = (opened, refusals, tries)

        loops = [threading.Thread(target=greedy, args=("greedy", None)),
                 threading.Thread(target=greedy, args=("hoarder", BLOB))]  # fmt: skip
        for t in loops:
            t.start()
        with client("calm") as calm:  # meanwhile: open, run, resume (pausing only its own)
            for _ in range(2):
                extra = calm.post("/api/sessions", json={"profile": "quick"})
                assert extra.status_code == 201, extra.text
                third = extra.json()["id"]
                assert cell(calm, third, "print('third')")["stdout"] == "third\n"
                assert state(calm, mine[0])["paused"] is True  # its own least recently used
                for i, sid in enumerate(mine):  # each resumed with its state
                    assert cell(calm, sid, "print(v)")["stdout"] == f"{i}\n"
                assert calm.delete(f"/api/sessions/{third}").status_code == 204
        for t in loops:
            t.join(90)
        assert set(got) == {"greedy", "hoarder"}

        # the count budget: its live sessions and PER_KEY paused ones, then a clear refusal
        opened, refusals, tries = got["greedy"]
        assert len(opened) == LIVE + PER_KEY, (len(opened), [r.text for r in refusals[:1]])
        assert refusals and tries <= 10_000
        for r in refusals:
            assert r.status_code == 429 and r.json()["error"]["code"] == "paused_sessions_budget", r.text
        assert "session_paused_per_key = 4" in refusals[0].json()["error"]["message"]
        # the byte budget: refused once its sessions no longer fit, before the count budget
        hoarded, hoarder_refusals, _ = got["hoarder"]
        assert 2 <= len(hoarded) < LIVE + PER_KEY, len(hoarded)
        assert hoarder_refusals and all(r.status_code == 429 for r in hoarder_refusals)
        message = hoarder_refusals[0].json()["error"]
        assert message["code"] == "paused_sessions_budget" and "snapshot_key_bytes" in message["message"]

        with client("calm") as calm:  # nothing of calm's was paused for them: both still live
            for i, sid in enumerate(mine):
                assert state(calm, sid)["paused"] is False
                assert cell(calm, sid, "print(v)")["stdout"] == f"{i}\n"
            assert calm.post("/api/sessions", json={"profile": "quick"}).status_code == 201  # and it opens more
        # the disk: per key, its budget plus the snapshots of its live sessions (the slack)
        files = {p.stem: p.stat().st_size for p in store.glob("*/*.snap")}
        greedy_files = [files[s] for s in opened if s in files]
        assert len(greedy_files) <= PER_KEY + LIVE
        assert sum(files[s] for s in hoarded if s in files) <= KEY_BYTES
        assert sum(files.values()) <= 3 * KEY_BYTES
        assert live.health()["status"] == "ok"
