"""The browser tier's pages: the playground, the embed script, the sandbox frame (assets: ``assets``).

``page_routes()`` returns Starlette routes that ``assembly.create_app`` mounts, and
``browser_modules_source()`` what it gives that server's ``Executor`` so that refusals name the
browser tier when its index has a package:

- ``/``: the playground (cross-origin isolated unless ``?isolation=off``).
- ``/embed.js``: the one script a course page adds; it defines the ``<wasm-runner>`` element.
- ``/sandbox``: the opaque-origin frame that owns the Pyodide worker. Its CSP sandboxes it
  (``sandbox allow-scripts``: no same-origin) and lets it connect only to this server's origin
  and the configured package index.
- ``/assets/<hash>/<file>`` and ``/pyodide/<hash>/<file>``: the ES modules, the CodeMirror
  bundle and Pyodide from ``web/node_modules``, under content-hashed, immutable, compressed URLs.

Settings (environment): ``WASM_RUNNER_WEB_DIR`` (the ``web/`` folder; default: next to the
package), ``WASM_RUNNER_WHEELHOUSE`` (default ``web/wheelhouse``) and ``WASM_RUNNER_PYODIDE_INDEX_URL`` (where compiled packages such as numpy come from;
default: the official index of the exact Pyodide version; empty: offline, stdlib and wheelhouse
only).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..packages.store import image_modules
from ..packages.tiers import TIER_MODULES_PATH, BrowserModules, tier_modules
from .assets import WebAssets, get_assets
from .locations import package_index_url, web_dir, wheelhouse_dir

__all__ = [
    "WebAssets",
    "browser_modules_source",
    "get_assets",
    "package_index_url",
    "page_routes",
    "web_dir",
    "wheelhouse_dir",
]

IMMUTABLE = "public, max-age=31536000, immutable"
# Assets fetched by the opaque-origin frame and by embedding pages need CORS and CORP.
CROSS_ORIGIN_HEADERS = {
    "access-control-allow-origin": "*",
    "cross-origin-resource-policy": "cross-origin",
    "x-content-type-options": "nosniff",
}


def _request_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def _snapshot_wanted(request: Request) -> bool:
    """``?snapshot=off`` starts Python normally (benchmarks compare both; nothing else changes)."""
    return request.query_params.get("snapshot", "on") != "off"


def _asset_response(request: Request, group: str) -> Response:
    assets = get_assets()
    files = assets.app_files if group == "app" else assets.pyodide_files
    expected = assets.app_hash if group == "app" else assets.pyodide_hash
    name = request.path_params["name"]
    if request.path_params["hash"] != expected or name not in files:
        return PlainTextResponse(
            "not found", status_code=404, headers=CROSS_ORIGIN_HEADERS
        )
    content, encoding, media_type = assets.body(
        files, name, request.headers.get("accept-encoding", "")
    )
    headers = {
        **CROSS_ORIGIN_HEADERS,
        "cache-control": IMMUTABLE,
        "vary": "accept-encoding",
    }
    if encoding:
        headers["content-encoding"] = encoding
    return Response(content, media_type=media_type, headers=headers)


async def _app_asset(request: Request) -> Response:
    return _asset_response(request, "app")


async def _pyodide_asset(request: Request) -> Response:
    return _asset_response(request, "pyodide")


def _isolation_headers() -> dict[str, str]:
    return {
        "cross-origin-opener-policy": "same-origin",
        "cross-origin-embedder-policy": "require-corp",
    }


def _server_config(request: Request) -> object:
    """The HTTP service's settings (``ServerConfig``), or None for pages served without one."""
    return getattr(getattr(request.app.state, "service", None), "config", None)


async def _tier_modules(request: Request) -> Response:
    """Each tier's importable top-level modules (the server's image and lock; the browser's index):
    the browser tier's worker fetches it once to name the tier that has a missing module."""
    service = getattr(request.app.state, "service", None)
    store = getattr(getattr(service, "executor", None), "packages", None)
    body = json.dumps(tier_modules(image_modules("default"), getattr(store, "lock", None), _served_modules),
                      separators=(",", ":"))
    headers = {**CROSS_ORIGIN_HEADERS, "cache-control": "public, max-age=300"}
    return Response(body, media_type="application/json", headers=headers)


async def _playground(request: Request) -> Response:
    assets = get_assets()
    isolated = request.query_params.get("isolation", "on") != "off"
    snapshot = _snapshot_wanted(request)
    origin = _request_origin(request)
    # The page starts fetching what the sandbox frame needs while it is still parsing (preload
    # links in <head>, then client.js hands the bytes over); see docs/browser.md.
    relay = assets.relay_urls(origin, snapshot=snapshot)
    config = {
        "tier": "auto",
        "base": "/",
        "isolated": isolated,
        "relay": relay,
        "sandbox": "sandbox" if snapshot else "sandbox?snapshot=off",
        # the operator's [server] trust_html: the programs' HTML shown unsanitised
        "trust_html": bool(getattr(_server_config(request), "trust_html", False)),
    }
    html = assets.render(
        "playground.html", config_json=json.dumps(config), isolated=isolated, relay=relay
    )
    headers = {
        "content-security-policy": (
            "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; frame-src 'self'; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'none'"
        ),
        "cache-control": "no-cache",
        "referrer-policy": "no-referrer",
    }
    if isolated:
        headers.update(_isolation_headers())
    return HTMLResponse(html, headers=headers)


async def _sandbox(request: Request) -> Response:
    assets = get_assets()
    origin = _request_origin(request)
    pyodide: dict[str, Any] = {
        "indexURL": origin + assets.pyodide_base,
        "lockFileURL": origin + assets.pyodide_base + "pyodide-lock.json",
        "tierModulesURL": origin + TIER_MODULES_PATH,
    }
    snapshot = assets.snapshot_config(origin) if _snapshot_wanted(request) else None
    if snapshot is not None:
        pyodide["snapshot"] = snapshot
    html = assets.render(
        "sandbox.html", config_json=json.dumps({"pyodide": pyodide}), origin=origin
    )
    headers = {
        "content-security-policy": assets.frame_csp(origin),
        "cross-origin-embedder-policy": "require-corp",
        "cross-origin-resource-policy": "cross-origin",
        "cache-control": "no-cache",
        "referrer-policy": "no-referrer",
    }
    return HTMLResponse(html, headers=headers)


async def _embed_script(request: Request) -> Response:
    assets = get_assets()
    module = assets.app_url("embed.js")
    body = (
        '// wasm-runner embed: <script type="module" src=".../embed.js"></script>, then\n'
        "// <wasm-runner tier=\"browser\" readonly>print('hi')</wasm-runner>\n"
        f"import {{ defineRunnerElement }} from {json.dumps(module)};\n"
        'const base = new URL("/", import.meta.url).href;\n'
        "// Pyodide's large files, fetched by this page for the sandbox frame as soon as an example needs it\n"
        f"const relay = {json.dumps(assets.relay_urls(''))}.map((path) => new URL(path, base).href);\n"
        "defineRunnerElement({ base, relay });\n"
    )
    headers = {**CROSS_ORIGIN_HEADERS, "cache-control": "public, max-age=300"}
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)


def _needs_assets(handler: Any) -> Any:
    """A clear 503 instead of a crash when web/ was not set up (no ``npm ci``)."""

    async def guarded(request: Request) -> Response:
        try:
            get_assets()
        except (OSError, KeyError, ValueError) as exc:
            return PlainTextResponse(
                f"The browser tier is not installed ({exc}); run scripts/setup.sh "
                "(npm ci and npm run build in web/).",
                status_code=503,
            )
        response: Response = await handler(request)
        return response

    return guarded


def _served_modules() -> frozenset[str]:
    return get_assets().browser_modules


def browser_modules_source() -> BrowserModules | None:
    """What gives the modules of the browser tier these pages serve (None when the browser tier
    is not installed): the server that mounts the pages hands it to its ``Executor``."""
    return _served_modules if _pyodide_installed() else None


def _pyodide_installed() -> bool:
    return (web_dir() / "node_modules" / "pyodide").is_dir()


def page_routes() -> list[BaseRoute]:
    """The playground, the embed script, the sandbox frame and the hashed assets."""
    if _pyodide_installed():
        get_assets()  # hash and start compressing at start-up, not on the first request
    return [
        Route("/", _needs_assets(_playground), methods=["GET"], name="playground"),
        Route(
            "/embed.js",
            _needs_assets(_embed_script),
            methods=["GET"],
            name="embed_script",
        ),
        Route(TIER_MODULES_PATH, _needs_assets(_tier_modules), methods=["GET"], name="tier_modules"),
        Route(
            "/sandbox", _needs_assets(_sandbox), methods=["GET"], name="sandbox_frame"
        ),
        Route(
            "/assets/{hash}/{name}",
            _needs_assets(_app_asset),
            methods=["GET"],
            name="app_asset",
        ),
        Route(
            "/pyodide/{hash}/{name}",
            _needs_assets(_pyodide_asset),
            methods=["GET"],
            name="pyodide_asset",
        ),
    ]
