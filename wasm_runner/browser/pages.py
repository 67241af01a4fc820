"""The browser tier's pages and assets: the playground, the embed script, the sandbox frame.

``page_routes()`` returns Starlette routes that ``server.py`` mounts:

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

import gzip
import hashlib
import json
import mimetypes
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from .locations import package_index_url, pyodide_version, web_dir, wheelhouse_dir
from .wheelhouse import rewrite_lock

try:  # Brotli is optional: gzip is always there
    import brotli  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - brotli is a declared dependency
    brotli = None

__all__ = [
    "WebAssets",
    "get_assets",
    "package_index_url",
    "page_routes",
    "web_dir",
    "wheelhouse_dir",
]

IMMUTABLE = "public, max-age=31536000, immutable"
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
)
APP_SUFFIXES = (".js", ".css", ".svg")
COMPRESSIBLE = (".js", ".mjs", ".css", ".svg", ".json", ".wasm", ".html")
# Assets fetched by the opaque-origin frame and by embedding pages need CORS and CORP.
CROSS_ORIGIN_HEADERS = {
    "access-control-allow-origin": "*",
    "cross-origin-resource-policy": "cross-origin",
    "x-content-type-options": "nosniff",
}
mimetypes.add_type("text/javascript", ".mjs")
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("application/wasm", ".wasm")


@dataclass
class _Asset:
    path: Path | None
    content: bytes
    media_type: str
    encoded: dict[str, bytes] = field(default_factory=dict)


class WebAssets:
    """Content-hashed asset groups, compressed once (Brotli, gzip) and kept in memory."""

    def __init__(self, root: Path | None = None, index_url: str | None = None) -> None:
        self.root = root or web_dir()
        self.version = pyodide_version(self.root)
        self.index_url = (
            package_index_url(self.version) if index_url is None else index_url
        )
        self._lock = threading.Lock()
        self.app_files = self._collect_app_files()
        self.pyodide_files = self._collect_pyodide_files()
        self.app_hash = _digest(self.app_files)
        self.pyodide_hash = f"{self.version}-{_digest(self.pyodide_files)}"

    def _collect_app_files(self) -> dict[str, _Asset]:
        files: dict[str, _Asset] = {}
        for folder in (self.root / "src", self.root / "dist", self.root / "static"):
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                if (
                    path.is_file()
                    and path.suffix in APP_SUFFIXES
                    and path.name not in files
                ):
                    files[path.name] = _Asset(
                        path, path.read_bytes(), _media_type(path.name)
                    )
        return files

    def _collect_pyodide_files(self) -> dict[str, _Asset]:
        pyodide = self.root / "node_modules" / "pyodide"
        files: dict[str, _Asset] = {}
        for name in PYODIDE_FILES:
            path = pyodide / name
            files[name] = _Asset(path, path.read_bytes(), _media_type(name))
        wheelhouse = wheelhouse_dir(self.root)
        local: dict[str, Any] = {}
        if (wheelhouse / "wheelhouse.json").is_file():
            local = json.loads((wheelhouse / "wheelhouse.json").read_text())["packages"]
            for entry in local.values():
                wheel = wheelhouse / entry["file_name"]
                files[wheel.name] = _Asset(wheel, wheel.read_bytes(), "application/zip")
        stock = json.loads((pyodide / "pyodide-lock.json").read_text())
        lock = rewrite_lock(stock, self.index_url, local)
        files["pyodide-lock.json"] = _Asset(
            None, json.dumps(lock, separators=(",", ":")).encode(), "application/json"
        )
        return files

    @cached_property
    def _templates(self) -> Environment:
        return Environment(
            loader=FileSystemLoader(str(self.root / "templates")),
            autoescape=select_autoescape(["html"]),
        )

    def render(self, name: str, **context: Any) -> str:
        return self._templates.get_template(name).render(assets=self, **context)

    def app_url(self, name: str) -> str:
        if name not in self.app_files:
            raise KeyError(
                f"no web asset named {name!r}; run `npm ci && npm run build` in web/"
            )
        return f"/assets/{self.app_hash}/{name}"

    @property
    def pyodide_base(self) -> str:
        return f"/pyodide/{self.pyodide_hash}/"

    def body(
        self, group: dict[str, _Asset], name: str, accept_encoding: str
    ) -> tuple[bytes, str | None, str]:
        """The bytes to send for ``name``, compressed when the client accepts it."""
        asset = group[name]
        wanted = [e.strip().split(";")[0] for e in accept_encoding.lower().split(",")]
        if not name.endswith(COMPRESSIBLE):
            return asset.content, None, asset.media_type
        for encoding in ("br", "gzip"):
            if encoding in wanted and (encoding != "br" or brotli is not None):
                return self._encoded(asset, encoding), encoding, asset.media_type
        return asset.content, None, asset.media_type

    def _encoded(self, asset: _Asset, encoding: str) -> bytes:
        with self._lock:
            if encoding not in asset.encoded:
                asset.encoded[encoding] = _compress(asset.content, encoding)
            return asset.encoded[encoding]

    def precompress(self) -> None:
        """Compress every asset now (the first page load then pays nothing)."""
        for group in (self.app_files, self.pyodide_files):
            for name, asset in group.items():
                if name.endswith(COMPRESSIBLE):
                    for encoding in ("br", "gzip") if brotli else ("gzip",):
                        self._encoded(asset, encoding)

    def frame_csp(self, origin: str) -> str:
        """The sandbox frame's policy: opaque origin, scripts and connections to this origin only."""
        connect = [origin]
        index_origin = _origin_of(self.index_url)
        if index_origin and index_origin != origin:
            connect.append(index_origin)
        return "; ".join(
            [
                "sandbox allow-scripts",
                "default-src 'none'",
                f"script-src {origin} 'wasm-unsafe-eval'",
                "worker-src blob:",
                f"connect-src {' '.join(connect)}",
                "base-uri 'none'",
                "form-action 'none'",
                "frame-ancestors *",
            ]
        )


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _media_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name)
    media = guessed or "application/octet-stream"
    return (
        f"{media}; charset=utf-8"
        if media.startswith("text/") or media.endswith("json")
        else media
    )


def _digest(files: dict[str, _Asset]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name].content).digest())
    return h.hexdigest()[:16]


def _compress(content: bytes, encoding: str) -> bytes:
    if encoding == "br":
        packed: bytes = brotli.compress(content, quality=9)
        return packed
    return gzip.compress(content, compresslevel=6, mtime=0)


def _request_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


_assets: WebAssets | None = None
_assets_lock = threading.Lock()


def get_assets() -> WebAssets:
    """The process-wide asset set, built on first use."""
    global _assets
    with _assets_lock:
        if _assets is None:
            _assets = WebAssets()
            # compress everything in the background so the first visitor does not wait for it
            threading.Thread(
                target=_assets.precompress, name="precompress", daemon=True
            ).start()
        return _assets


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


async def _playground(request: Request) -> Response:
    assets = get_assets()
    isolated = request.query_params.get("isolation", "on") != "off"
    config = {"tier": "auto", "base": "/", "isolated": isolated}
    html = assets.render(
        "playground.html", config_json=json.dumps(config), isolated=isolated
    )
    headers = {
        "content-security-policy": (
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
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
    pyodide = {
        "indexURL": origin + assets.pyodide_base,
        "lockFileURL": origin + assets.pyodide_base + "pyodide-lock.json",
    }
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
        'defineRunnerElement({ base: new URL("/", import.meta.url).href });\n'
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


def page_routes() -> list[BaseRoute]:
    """The playground, the embed script, the sandbox frame and the hashed assets."""
    if (web_dir() / "node_modules" / "pyodide").is_dir():
        get_assets()  # hash and start compressing at start-up, not on the first request
    return [
        Route("/", _needs_assets(_playground), methods=["GET"], name="playground"),
        Route(
            "/embed.js",
            _needs_assets(_embed_script),
            methods=["GET"],
            name="embed_script",
        ),
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
