"""The browser tier's start-up: the Pyodide memory snapshot (built, cached under its inputs' hash,
verified, rebuilt when stale, served immutable, used in Chromium, rejected with a normal start
when it does not load) and the spare worker after a Stop that ended the worker.

Real parts only: Node makes the snapshot, uvicorn serves it on 127.0.0.1, Debian's Chromium runs
it (see tests/support/browser.py).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest
from tests.support.browser import (
    READY_SECONDS,
    open_playground,
    poll,
    run_and_stop,
    run_in_browser,
    shared_browser,
    shared_server,
    start_uvicorn,
    stop_process,
)

from wasm_runner.browser.locations import web_dir
from wasm_runner.browser.pyodide_snapshot import SNAPSHOT_INPUTS, SnapshotStore

WEB = web_dir()


def _web_copy(tmp: Path) -> Path:
    """A web/ folder of its own (src/ and snapshot.mjs copied, node_modules shared)."""
    web = tmp / "web"
    web.mkdir()
    shutil.copytree(WEB / "src", web / "src")
    shutil.copy(WEB / "snapshot.mjs", web / "snapshot.mjs")
    (web / "node_modules").symlink_to(WEB / "node_modules")
    return web


def test_store_builds_verifies_and_rebuilds_when_an_input_changes(tmp_path):
    web = _web_copy(tmp_path)
    store = SnapshotStore(web, folder=tmp_path / "cache")
    assert store.cached() is None
    built = store.ensure()
    assert gzip.decompress(built.content)[:4] == b"WRSP"  # packed: only the pages that are not zero
    assert built.sha256 == hashlib.sha256(built.content).hexdigest()
    again = store.cached()
    assert again is not None and again.sha256 == built.sha256
    record = json.loads((store.folder / f"{built.key}.json").read_text())
    assert record == {"key": built.key, "sha256": built.sha256, "bytes": len(built.content)}

    # tampered on disk: not used, deleted, rebuilt
    data = store.folder / f"{built.key}.bin"
    data.write_bytes(built.content[:-1] + bytes([built.content[-1] ^ 1]))
    assert store.cached() is None
    assert not data.exists()

    # stale: an input changes (here the bootstrap), so the key changes and the old one is not found
    (web / "src" / "bootstrap.py.js").write_text(
        (web / "src" / "bootstrap.py.js").read_text() + "\n// changed\n"
    )
    assert store.key() != built.key
    assert store.cached() is None
    rebuilt = store.ensure()
    assert rebuilt.key == store.key()
    assert "src/bootstrap.py.js" in SNAPSHOT_INPUTS and "src/worker-core.js" in SNAPSHOT_INPUTS


def test_sandbox_names_the_snapshot_and_serves_it_immutable():
    base = shared_server()
    html = urllib.request.urlopen(base + "/sandbox").read().decode()
    config = json.loads(html.split('id="wasm-runner-config">', 1)[1].split("</script>", 1)[0])
    snapshot = config["pyodide"]["snapshot"]
    assert snapshot["url"].startswith(base + "/pyodide/") and snapshot["url"].endswith(".bin.gz")
    with urllib.request.urlopen(snapshot["url"]) as response:
        body = response.read()
        assert "immutable" in response.headers["cache-control"]
        assert response.headers["access-control-allow-origin"] == "*"
        assert response.headers.get("content-encoding") is None  # gzip bytes, unpacked by the worker
    assert hashlib.sha256(body).hexdigest() == snapshot["sha256"]
    off = urllib.request.urlopen(base + "/sandbox?snapshot=off").read().decode()
    assert '"snapshot"' not in off
    # the playground preloads what the frame needs, the snapshot among it
    page = urllib.request.urlopen(base + "/").read().decode()
    assert f'<link rel="preload" href="{snapshot["url"]}" as="fetch" crossorigin>' in page
    # a wrong name is a plain 404, not a crash
    bad = snapshot["url"].replace("snapshot-", "snapshot-0")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad)
    assert err.value.code == 404


@pytest.mark.parametrize("suffix, used", [("/", "used"), ("/?snapshot=off", "none")])
def test_chromium_starts_from_the_snapshot_or_normally_with_the_same_results(suffix, used):
    page = open_playground(suffix)
    info = page.evaluate("window.playground.runner.browserInfo")
    assert info["snapshot"] == used
    result = run_in_browser(
        page, "import sys, random\nprint(6*7, sys.path[0])\nprint(1/0 if random.random() < 0 else 'ok')"
    )
    assert result["status"] == "ok", result
    assert result["stdout"] == "42 /wasm-runner\nok\n"
    error = run_in_browser(page, "def f():\n    return undefined_name\nf()")
    assert error["status"] == "error"
    assert "NameError: name 'undefined_name' is not defined" in error["stderr"]
    assert 'File "main.py", line 2, in f' in error["stderr"] or "line 2" in error["stderr"]
    assert page.errors == []
    page.context.close()


def test_a_snapshot_that_does_not_load_means_a_normal_start_that_says_so(tmp_path):
    """The server's cache holds a snapshot that verifies (its record matches) but is not Pyodide's
    memory, as one from another build would be: the worker starts Python normally, says so in the
    console and the footer, and runs programs as usual."""
    cache = tmp_path / "cache"
    store = SnapshotStore(WEB, folder=cache / "pyodide-snapshots")
    key = store.key()
    content = gzip.compress(os.urandom(1) * 8192, mtime=0)
    (store.folder / f"{key}.bin").write_bytes(content)
    (store.folder / f"{key}.json").write_text(
        json.dumps({"key": key, "sha256": hashlib.sha256(content).hexdigest(), "bytes": len(content)})
    )
    env = {
        "WASM_RUNNER_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    process, base = start_uvicorn("tests.support.pages_only_app:app", env)
    try:
        context = shared_browser().new_context()
        page = context.new_page()
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(base + "/?tier=browser")
        info = poll(page, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
        assert info["snapshot"] == "rejected"
        assert "not a packed wasm-runner snapshot" in info["snapshot_note"]
        assert any("snapshot was not used" in line and "starting Python normally" in line for line in console)
        assert "started without the snapshot" in page.text_content("#where")
        result = run_in_browser(page, "print(sum(range(10)))")
        assert result["status"] == "ok" and result["stdout"] == "45\n"
        context.close()
    finally:
        stop_process(process)


LEAKY = """import sys, types, js
secret = 'left over'
sys.modules['made_up'] = types.ModuleType('made_up')
open('/home/pyodide/left.txt', 'w').write('x')
js.setInterval(lambda: print('tick from the stopped run'), 20)
import collections, itertools
print('go', flush=True)
collections.deque(itertools.count(), maxlen=0)  # C code: only ending the worker stops it
"""

CHECK_FRESH = """import sys, os, time
time.sleep(0.3)
print('secret' in globals(), 'made_up' in sys.modules, os.path.exists('/home/pyodide/left.txt'))
"""


@pytest.mark.parametrize("suffix", ["/", "/?isolation=off"])
def test_the_spare_worker_after_a_terminating_stop_is_a_fresh_interpreter(suffix):
    page = open_playground(suffix)
    assert run_in_browser(page, "print('first')")["stdout"] == "first\n"
    stopped = run_and_stop(page, LEAKY, 300)
    assert stopped["status"] == "cancelled"
    after = run_in_browser(page, CHECK_FRESH)
    assert after["status"] == "ok", after
    assert after["stdout"] == "False False False\n"  # no globals, modules, files or timers left
    # the runtime that ran it was the spare, started after the first run
    assert page.evaluate("window.playground.runner.browserInfo.spare") is True
    assert page.errors == []
    page.context.close()
