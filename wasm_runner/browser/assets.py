"""The browser tier's static assets: the app's ES modules and Pyodide's files from ``web/``, each
set under a content hash (immutable URLs), precompressed (brotli, gzip), and the page templates.

``get_assets()`` is the process-wide set, built on first use; ``pages`` serves it. Large files are
packed once per cache folder (``<cache>/web-packed/<sha256>.br9|gz6``): replicas and restarts
sharing the cache read them instead of packing them again.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import mimetypes
import os
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..cache import CacheUnsafe, cache_dir, private_file_ok
from ..packages.lock import normalize
from .locations import package_index_url, pyodide_version, web_dir, wheelhouse_dir
from .pyodide_snapshot import Snapshot, SnapshotStore, snapshot_enabled
from .wheelhouse import read_manifest, rewrite_lock

try:  # Brotli is optional: gzip is always there
    import brotli  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - brotli is a declared dependency
    brotli = None

logger = logging.getLogger(__name__)

__all__ = ["APP_SUFFIXES", "COMPRESSIBLE", "PACKED_CACHE_MIN", "PYODIDE_FILES", "RELAYED", "Asset", "WebAssets", "get_assets"]

PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
)
# fetched by the page and handed to the frame, whose opaque origin has no HTTP cache
RELAYED = ("pyodide.asm.wasm", "python_stdlib.zip")
APP_SUFFIXES = (".js", ".css", ".svg", ".wasm", ".woff2")  # .wasm: the editor's lint (dist/ruff.wasm); .woff2: KaTeX's fonts
COMPRESSIBLE = (".js", ".mjs", ".css", ".svg", ".json", ".wasm", ".html")
# a larger asset is sent as it is until the background thread has packed it: Brotli at quality 9
# takes seconds per MB on a busy machine, and a request must not wait for that
PACK_ON_REQUEST_MAX = 256 * 1024
mimetypes.add_type("text/javascript", ".mjs")
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("application/wasm", ".wasm")
mimetypes.add_type("font/woff2", ".woff2")


@dataclass
class Asset:
    path: Path | None
    content: bytes
    media_type: str
    encoded: dict[str, bytes] = field(default_factory=dict)


class WebAssets:
    """Content-hashed asset groups, compressed once (Brotli, gzip) and kept in memory."""

    def __init__(
        self,
        root: Path | None = None,
        index_url: str | None = None,
        snapshots: SnapshotStore | None = None,
    ) -> None:
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
        self.snapshot: Snapshot | None = None
        self.snapshots = snapshots
        if self.snapshots is None and snapshot_enabled():
            self.snapshots = SnapshotStore(self.root)

    def start_snapshot(self) -> None:
        """Serve the cached snapshot now, or build it in the background (served once built)."""
        if self.snapshots is None:
            return
        try:
            cached = self.snapshots.cached()
        except OSError:
            cached = None
        if cached is not None:
            self.use_snapshot(cached)
        else:
            self.snapshots.ensure_in_background(self.use_snapshot)

    def use_snapshot(self, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` next to Pyodide's files (its name carries its hash)."""
        with self._lock:
            if self.snapshot is not None:
                self.pyodide_files.pop(self.snapshot.name, None)
            self.pyodide_files[snapshot.name] = Asset(
                None, snapshot.content, "application/octet-stream"
            )
            self.snapshot = snapshot

    def snapshot_config(self, origin: str) -> dict[str, str] | None:
        """What the sandbox page tells the worker: the snapshot's URL and sha256, or None."""
        snapshot = self.snapshot
        if snapshot is None:
            return None
        return {"url": origin + self.pyodide_base + snapshot.name, "sha256": snapshot.sha256}

    def relay_urls(self, origin: str, snapshot: bool = True) -> list[str]:
        """The large files the page fetches for the sandbox frame (see client.js)."""
        urls = [origin + self.pyodide_base + name for name in RELAYED]
        config = self.snapshot_config(origin) if snapshot else None
        if config is not None:
            urls.append(config["url"])
        return urls

    def _collect_app_files(self) -> dict[str, Asset]:
        files: dict[str, Asset] = {}
        for folder in (self.root / "src", self.root / "dist", self.root / "static"):
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                if (
                    path.is_file()
                    and path.suffix in APP_SUFFIXES
                    and path.name not in files
                ):
                    files[path.name] = Asset(
                        path, path.read_bytes(), _media_type(path.name)
                    )
        return files

    def _collect_pyodide_files(self) -> dict[str, Asset]:
        pyodide = self.root / "node_modules" / "pyodide"
        files: dict[str, Asset] = {}
        for name in PYODIDE_FILES:
            path = pyodide / name
            files[name] = Asset(path, path.read_bytes(), _media_type(name))
        wheelhouse = wheelhouse_dir(self.root)
        local: dict[str, Any] = {}
        for name, entry in read_manifest(wheelhouse).items():
            wheel = wheelhouse / entry["file_name"]
            content = wheel.read_bytes() if wheel.is_file() else b""
            if hashlib.sha256(content).hexdigest() != entry.get("sha256"):
                # a changed or missing file is not served (Pyodide would refuse it anyway)
                logger.warning("wheelhouse: %s is missing or does not match its sha256; not served", wheel)
                continue
            files[wheel.name] = Asset(wheel, content, "application/zip")
            local[name] = entry
        stock = json.loads((pyodide / "pyodide-lock.json").read_text())
        lock = rewrite_lock(stock, self.index_url, local)
        files["pyodide-lock.json"] = Asset(
            None, json.dumps(lock, separators=(",", ":")).encode(), "application/json"
        )
        return files

    @cached_property
    def browser_modules(self) -> frozenset[str]:
        """The browser tier's importable top-level modules and package names: those of the
        ``pyodide-lock.json`` this server serves (offline: the wheelhouse's only)."""
        lock = json.loads(self.pyodide_files["pyodide-lock.json"].content)
        names: set[str] = set()
        for name, entry in (lock.get("packages") or {}).items():
            names.add(normalize(name))
            names.update(str(m) for m in entry.get("imports") or ())
        return frozenset(names)

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
        self, group: dict[str, Asset], name: str, accept_encoding: str
    ) -> tuple[bytes, str | None, str]:
        """The bytes to send for ``name``, compressed when the client accepts it."""
        asset = group[name]
        wanted = [e.strip().split(";")[0] for e in accept_encoding.lower().split(",")]
        if not name.endswith(COMPRESSIBLE):
            return asset.content, None, asset.media_type
        pack = len(asset.content) <= PACK_ON_REQUEST_MAX
        for encoding in ("br", "gzip"):
            if encoding in wanted and (encoding != "br" or brotli is not None):
                packed = self._encoded(asset, encoding, pack=pack)
                if packed is not None:
                    return packed, encoding, asset.media_type
        return asset.content, None, asset.media_type

    def _encoded(self, asset: Asset, encoding: str, pack: bool = True) -> bytes | None:
        """``asset`` packed with ``encoding``; packed now if ``pack`` (else None until then).
        Packing happens outside the lock, so no request waits for another asset's."""
        with self._lock:
            done = asset.encoded.get(encoding)
        if done is None and pack:
            packed = _compress(asset.content, encoding)
            with self._lock:
                done = asset.encoded.setdefault(encoding, packed)
        return done

    def precompress(self) -> None:
        """Compress every asset now (the first page load then pays nothing)."""
        for group in (self.app_files, self.pyodide_files):
            for name, asset in list(group.items()):
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


def _digest(files: dict[str, Asset]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name].content).digest())
    return h.hexdigest()[:16]


# assets at least this large are packed once per cache folder (``<cache>/web-packed/``), not once
# per process: Brotli at quality 9 costs about 7 s of CPU for Pyodide's files, which every replica
# and every restart sharing the cache would otherwise spend again at start-up
PACKED_CACHE_MIN = 256 * 1024
_PACKING = {"br": "br9", "gzip": "gz6"}  # the encoder settings, part of the cached file's name


def _pack(content: bytes, encoding: str) -> bytes:
    if encoding == "br":
        packed: bytes = brotli.compress(content, quality=9)
        return packed
    return gzip.compress(content, compresslevel=6, mtime=0)


def _compress(content: bytes, encoding: str) -> bytes:
    """``content`` packed with ``encoding``; a large asset's packing is kept in the private cache
    folder under the content's sha256 and read from there by the next process."""
    if len(content) < PACKED_CACHE_MIN:
        return _pack(content, encoding)
    try:
        folder = cache_dir() / "web-packed"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / f"{hashlib.sha256(content).hexdigest()}.{_PACKING[encoding]}"
        if private_file_ok(path):
            return path.read_bytes()
    except (OSError, CacheUnsafe):
        return _pack(content, encoding)
    packed = _pack(content, encoding)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:  # written whole, then renamed: a reader never sees half a file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(packed)
        os.replace(tmp, path)
    except OSError:
        logger.warning("could not keep the packed asset %s in the cache", path.name)
        with contextlib.suppress(OSError):
            tmp.unlink()
    return packed


_assets: WebAssets | None = None
_assets_lock = threading.Lock()


def get_assets() -> WebAssets:
    """The process-wide asset set, built on first use."""
    global _assets
    with _assets_lock:
        if _assets is None:
            _assets = WebAssets()
            _assets.start_snapshot()
            # compress everything in the background so the first visitor does not wait for it
            threading.Thread(
                target=_assets.precompress, name="precompress", daemon=True
            ).start()
        return _assets
