"""The browser tier's Pyodide memory snapshot: built once, cached under a content hash of its
inputs, verified before it is served.

A worker that loads the snapshot skips Python's start-up and the bootstrap (``web/src/
bootstrap.py.js``): the interpreter comes back with both already done. The snapshot is made in
Node by ``web/snapshot.mjs`` (the same ``installBootstrap`` code the worker runs on a normal
start), at ``wasm-runner warm`` or, when the cache has none for the current inputs, by the server
in the background after start-up (page loads until then start Python normally).

- **Key**: sha256 over Pyodide's files (``pyodide.asm.wasm``, ``pyodide.asm.mjs``, ``pyodide.mjs``,
  ``python_stdlib.zip``, ``package.json``), ``web/snapshot.mjs``, ``web/src/worker-core.js``
  (which lists the preloaded modules), ``bootstrap.py.js``, ``pylib.js`` and ``protocol.js``.
  Any change gives a new key, so a stale snapshot is never found, only rebuilt.
- **Cache**: ``<cache>/pyodide-snapshots/<key>.bin`` (gzip) and ``<key>.json`` (its size and sha256),
  in wasm-runner's private cache folder (``WASM_RUNNER_CACHE``). A file whose sha256 does not
  match its record is deleted and rebuilt.
- **In the browser** the worker checks the sha256 again (the sandbox page names it) and starts
  Python normally when the snapshot does not verify or does not load (``web/src/worker-core.js``).

Setting: ``WASM_RUNNER_BROWSER_SNAPSHOT=off`` disables it (no build, nothing served).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..cache import cache_dir
from ..environment import BROWSER_SNAPSHOT

__all__ = [
    "SNAPSHOT_INPUTS",
    "Snapshot",
    "SnapshotStore",
    "snapshot_enabled",
]

log = logging.getLogger(__name__)

# Files under web/ whose content decides what the snapshot holds.
SNAPSHOT_INPUTS = (
    "node_modules/pyodide/package.json",
    "node_modules/pyodide/pyodide.mjs",
    "node_modules/pyodide/pyodide.asm.mjs",
    "node_modules/pyodide/pyodide.asm.wasm",
    "node_modules/pyodide/python_stdlib.zip",
    "snapshot.mjs",
    "src/worker-core.js",
    "src/bootstrap.py.js",
    "src/pylib.js",
    "src/protocol.js",
    "src/tiers.js",
    "src/sha256.js",
)
BUILD_SECONDS = 300  # a busy 2-core machine takes about 10 s


def snapshot_enabled() -> bool:
    """False when ``WASM_RUNNER_BROWSER_SNAPSHOT`` is ``off`` (or 0/false/no)."""
    value = (BROWSER_SNAPSHOT.raw() or "on").strip().lower()
    return value not in {"off", "0", "false", "no"}


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot: its bytes (gzip), their sha256 (hex) and the inputs key it was built for."""

    key: str
    sha256: str
    content: bytes

    @property
    def name(self) -> str:
        """The file name it is served under (content-addressed, so cacheable for ever)."""
        return f"snapshot-{self.sha256[:32]}.bin.gz"


class SnapshotStore:
    """Snapshots of one ``web/`` folder in one cache folder."""

    def __init__(self, web: Path, folder: Path | None = None) -> None:
        self.web = web
        self._folder = folder
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None

    @property
    def folder(self) -> Path:
        folder = self._folder or cache_dir() / "pyodide-snapshots"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return folder

    def key(self) -> str:
        """sha256 (hex) of every input file's name and content."""
        digest = hashlib.sha256()
        for name in SNAPSHOT_INPUTS:
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256((self.web / name).read_bytes()).digest())
        return digest.hexdigest()

    def cached(self) -> Snapshot | None:
        """The snapshot for the current inputs if the cache has one that verifies, else None.

        A file that does not match its record (size or sha256) is deleted, so it is rebuilt.
        """
        key = self.key()
        data, record = self.folder / f"{key}.bin", self.folder / f"{key}.json"
        if not data.is_file() or not record.is_file():
            return None
        try:
            meta = json.loads(record.read_text())
            content = data.read_bytes()
        except (OSError, ValueError):
            meta, content = {}, b""
        digest = hashlib.sha256(content).hexdigest()
        if meta.get("key") != key or meta.get("sha256") != digest or meta.get("bytes") != len(content):
            log.warning("the Pyodide snapshot %s does not match its record: deleted, to be rebuilt", data)
            for path in (data, record):
                path.unlink(missing_ok=True)
            return None
        return Snapshot(key=key, sha256=digest, content=content)

    def build(self) -> Snapshot:
        """Make the snapshot for the current inputs with Node (``web/snapshot.mjs``) and cache it."""
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed (scripts/setup.sh installs it)")
        key = self.key()
        folder = self.folder
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            out = Path(scratch) / "snapshot.bin"
            # The snapshot must be made where WebAssembly stack switching (JSPI) exists, as in
            # Chromium: newer Node has it, Node 22-23 behind --experimental-wasm-jspi, Node 20
            # (old API) behind --experimental-wasm-stack-switching. snapshot.mjs exits 3 without.
            for flags in ([], ["--experimental-wasm-jspi"], ["--experimental-wasm-stack-switching"]):
                done = subprocess.run(
                    [node, *flags, "snapshot.mjs", str(out)],
                    cwd=self.web,
                    capture_output=True,
                    text=True,
                    timeout=BUILD_SECONDS,
                    check=False,
                )
                if done.returncode == 0 or "bad option" not in done.stderr and done.returncode != 3:
                    break
            if done.returncode != 0 or not out.is_file():
                raise RuntimeError(f"snapshot.mjs failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            # served and cached gzipped (about 6 of 31 MB): the worker unpacks it natively
            content = gzip.compress(out.read_bytes(), compresslevel=6, mtime=0)
            digest = hashlib.sha256(content).hexdigest()
            # the record goes last: a snapshot without one is never used
            (folder / f"{key}.bin.tmp").write_bytes(content)
            os.replace(folder / f"{key}.bin.tmp", folder / f"{key}.bin")
            (folder / f"{key}.json.tmp").write_text(
                json.dumps({"key": key, "sha256": digest, "bytes": len(content)})
            )
            os.replace(folder / f"{key}.json.tmp", folder / f"{key}.json")
        self._prune(keep=key)
        return Snapshot(key=key, sha256=digest, content=content)

    def ensure(self) -> Snapshot:
        """The cached snapshot, built first when there is none (``wasm-runner warm``)."""
        with self._lock:
            return self.cached() or self.build()

    def ensure_in_background(self, on_ready: Callable[[Snapshot], None]) -> None:
        """Build the snapshot in a thread when the cache has none; ``on_ready`` gets it."""

        def work() -> None:
            try:
                on_ready(self.ensure())
            except Exception as exc:  # noqa: BLE001 - a failed build only means normal starts
                log.warning("no Pyodide snapshot (browser workers start Python normally): %s", exc)

        with self._lock:
            if self._building is not None and self._building.is_alive():
                return
            self._building = threading.Thread(target=work, name="pyodide-snapshot", daemon=True)
            self._building.start()

    def _prune(self, keep: str) -> None:
        """Keep the snapshots of the three newest input sets (each is about 30 MB)."""
        records = sorted(
            (p for p in self.folder.glob("*.json") if p.stem != keep),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for record in records[2:]:
            for path in (record, record.with_suffix(".bin")):
                path.unlink(missing_ok=True)
