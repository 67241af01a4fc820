"""The browser tier's routes: headers that make the isolation hold, hashed immutable assets,
compression, and clear 404s."""

from __future__ import annotations

import gzip
import json
import re
import stat

import brotli
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from wasm_runner.browser.assets import PACKED_CACHE_MIN, WebAssets
from wasm_runner.browser.locations import web_dir
from wasm_runner.browser.pages import get_assets, page_routes


@pytest.fixture(scope="module")
def client() -> TestClient:
    if not (web_dir() / "node_modules" / "pyodide").is_dir():
        pytest.fail(
            "web/node_modules is missing: run scripts/setup.sh (npm ci in web/)"
        )
    return TestClient(Starlette(routes=page_routes()), base_url="http://127.0.0.1:8000")


def test_playground_is_cross_origin_isolated_with_a_strict_csp(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["cross-origin-opener-policy"] == "same-origin"
    assert response.headers["cross-origin-embedder-policy"] == "require-corp"
    csp = response.headers["content-security-policy"]
    # WebAssembly may compile (the editor's lint, Ruff), JavaScript may not be eval'ed
    assert "script-src 'self' 'wasm-unsafe-eval';" in csp and " 'unsafe-eval'" not in csp
    assert get_assets().app_url("playground.js") in response.text
    off = client.get("/?isolation=off")
    assert "cross-origin-opener-policy" not in off.headers


def test_sandbox_frame_has_an_opaque_origin_and_narrow_connections(client):
    response = client.get("/sandbox")
    csp = response.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert (
        directives["sandbox"] == "allow-scripts"
    )  # no allow-same-origin: opaque origin
    assert directives["default-src"] == "'none'"
    connect = directives["connect-src"].split()
    assert connect[0] == "http://127.0.0.1:8000"
    assert all(
        c.startswith("https://") or c == "http://127.0.0.1:8000" for c in connect
    )
    assert "'unsafe-eval'" not in directives["script-src"]
    config = json.loads(
        re.search(r'id="wasm-runner-config">(.*?)</script>', response.text).group(1)
    )
    assert config["pyodide"]["indexURL"].startswith("http://127.0.0.1:8000/pyodide/")


def test_assets_are_hashed_immutable_compressed_and_cors(client):
    assets = get_assets()
    url = assets.app_url("client.js")
    response = client.get(url, headers={"accept-encoding": "br"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-encoding"] == "br"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["content-type"].startswith("text/javascript")
    assert b"export class Runner" in response.content  # httpx decodes br
    # a large file goes out as it is until the background thread has packed it (no request
    # waits seconds for Brotli), then packed
    big = assets.pyodide_base + "pyodide.asm.wasm"
    first = client.get(big, headers={"accept-encoding": "gzip"})
    assert first.headers["content-type"] == "application/wasm"
    assert first.headers.get("content-encoding") in (None, "gzip")
    assert first.content[:4] == b"\0asm"
    assets.precompress()  # what the background thread does (a no-op for what it already did)
    wasm = client.get(big, headers={"accept-encoding": "gzip"})
    assert wasm.headers["content-encoding"] == "gzip"
    assert wasm.content == first.content
    assert brotli and gzip  # both encoders present


def test_the_lock_points_compiled_packages_at_the_index(client):
    assets = get_assets()
    lock = client.get(assets.pyodide_base + "pyodide-lock.json").json()
    numpy = lock["packages"]["numpy"]
    if assets.index_url:
        assert numpy["file_name"].startswith(assets.index_url)
        assert assets.version in assets.index_url


def test_stale_or_unknown_asset_urls_are_404(client):
    assets = get_assets()
    assert client.get("/assets/0000000000000000/client.js").status_code == 404
    assert client.get(f"/assets/{assets.app_hash}/nope.js").status_code == 404
    assert client.get(f"/pyodide/{assets.pyodide_hash}/package.json").status_code == 404
    assert client.get(f"/assets/{assets.app_hash}/..%2Fpages.py").status_code == 404


def test_embed_script_imports_the_hashed_element_module(client):
    response = client.get("/embed.js")
    assert response.headers["access-control-allow-origin"] == "*"
    assert get_assets().app_url("embed.js") in response.text
    assert "defineRunnerElement" in response.text


def test_large_assets_are_packed_once_per_cache_folder(tmp_path, monkeypatch):
    """The next process (a replica, a restart) reads the packed files a first one kept in the
    cache folder instead of packing them again, and serves the same bytes."""
    monkeypatch.setenv("WASM_RUNNER_CACHE", str(tmp_path))
    first = WebAssets()
    first.precompress()
    kept = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "web-packed").iterdir()}
    large = [a for a in first.pyodide_files.values() if len(a.content) >= PACKED_CACHE_MIN and a.encoded]
    assert large and len(kept) == sum(len(a.encoded) for g in (first.app_files, first.pyodide_files)
                                      for a in g.values() if len(a.content) >= PACKED_CACHE_MIN)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "web-packed").iterdir())
    second = WebAssets()
    second.precompress()
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "web-packed").iterdir()} == kept  # read, not rewritten
    for name, asset in first.pyodide_files.items():
        assert second.pyodide_files[name].encoded == asset.encoded
    big = second.pyodide_files["pyodide.asm.wasm"]
    assert gzip.decompress(big.encoded["gzip"]) == big.content
