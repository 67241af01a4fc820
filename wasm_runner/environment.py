"""The ``WASM_RUNNER_*`` environment variables: the one module that reads them.

Each variable is declared here once, by name, with the module that says what it means; that module
asks it for its text (``raw``, ``text``, ``whole``) when it needs the value, never at import, so a
test, a launcher or the CLI may set one after the package is imported. The server's settings read
theirs through ``variables()`` (``settings.load_config``: one per ``[server]`` key, from the
settings' dataclass fields, and ``CONFIG``, ``API_KEYS``, ``DATA_DIR``, ``CLUSTER_SECRET_FILE``).
``tests/test_layout.py`` fails when another module reads ``os.environ`` for a ``WASM_RUNNER_*``
name; docs/configuration.md lists them all.

Standard library only: the sandbox, the engine and the cache folder import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "ALLOCATOR", "BROWSER_SNAPSHOT", "CACHE", "CHROMIUM", "COMPARE_SECRET", "DEBIAN_MIRROR", "DOCKER_IMAGE",
    "MEMORY_REPORT", "PACKAGES_LOCK", "PREFIX", "PRESTART", "PYODIDE_BUILD_PYTHON", "PYODIDE_DIR", "PYODIDE_INDEX_URL", "SNAPSHOT_SECRET",
    "VARIABLES", "VM_ACCEL", "VM_KERNEL", "Variable", "WEB_DIR", "WHEELHOUSE", "WORKDIR", "variables",
]  # fmt: skip

PREFIX = "WASM_RUNNER_"


@dataclass(frozen=True)
class Variable:
    """One ``WASM_RUNNER_*`` variable: its full ``name`` and the module that says what it means."""

    name: str
    used_by: str

    def raw(self) -> str | None:
        """Its text exactly as set (an empty variable is ``""``), or None when it is not set."""
        return os.environ.get(self.name)

    def text(self) -> str | None:
        """Its text, or None when it is not set or empty."""
        return self.raw() or None

    def whole(self, default: int, most: int) -> int:
        """A whole number from 0 to ``most`` (``default`` when unset or blank); ``ValueError``
        naming the variable otherwise."""
        raw = (self.raw() or "").strip()
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{self.name}={raw!r} is not a whole number") from None
        if not 0 <= value <= most:
            raise ValueError(f"{self.name} must be between 0 and {most}, not {value}")
        return value


# -- the core ---------------------------------------------------------------------------------------
CACHE = Variable(PREFIX + "CACHE", "cache.py")
ALLOCATOR = Variable(PREFIX + "ALLOCATOR", "engine.py")
PRESTART = Variable(PREFIX + "PRESTART", "sandbox/pool.py")
WORKDIR = Variable(PREFIX + "WORKDIR", "sandbox/workspace.py")
PACKAGES_LOCK = Variable(PREFIX + "PACKAGES_LOCK", "packages/store.py")
SNAPSHOT_SECRET = Variable(PREFIX + "SNAPSHOT_SECRET", "sandbox/sealing.py")
MEMORY_REPORT = Variable(PREFIX + "MEMORY_REPORT", "observability/memory_report.py")
# -- the browser tier's server side ------------------------------------------------------------------
WEB_DIR = Variable(PREFIX + "WEB_DIR", "browser/locations.py")
WHEELHOUSE = Variable(PREFIX + "WHEELHOUSE", "browser/locations.py")
PYODIDE_INDEX_URL = Variable(PREFIX + "PYODIDE_INDEX_URL", "browser/locations.py")
BROWSER_SNAPSHOT = Variable(PREFIX + "BROWSER_SNAPSHOT", "browser/pyodide_snapshot.py")
PYODIDE_BUILD_PYTHON = Variable(PREFIX + "PYODIDE_BUILD_PYTHON", "browser/pyodide_tools.py")
# -- the comparison ---------------------------------------------------------------------------------
DEBIAN_MIRROR = Variable(PREFIX + "DEBIAN_MIRROR", "compare/images.py")
VM_KERNEL = Variable(PREFIX + "VM_KERNEL", "compare/images.py")
VM_ACCEL = Variable(PREFIX + "VM_ACCEL", "compare/tiers/microvm_tier.py")
DOCKER_IMAGE = Variable(PREFIX + "DOCKER_IMAGE", "compare/tiers/docker_tier.py")
CHROMIUM = Variable(PREFIX + "CHROMIUM", "compare/tiers/pyodide_chromium_tier.py")
PYODIDE_DIR = Variable(PREFIX + "PYODIDE_DIR", "compare/tiers/pyodide_node_tier.py")
COMPARE_SECRET = Variable(PREFIX + "COMPARE_SECRET", "compare/probes.py")  # set for the probes' guests

VARIABLES = (
    CACHE, ALLOCATOR, PRESTART, WORKDIR, PACKAGES_LOCK, SNAPSHOT_SECRET, WEB_DIR, WHEELHOUSE, PYODIDE_INDEX_URL,
    BROWSER_SNAPSHOT, PYODIDE_BUILD_PYTHON, DEBIAN_MIRROR, VM_KERNEL, VM_ACCEL, DOCKER_IMAGE, CHROMIUM,
    PYODIDE_DIR, COMPARE_SECRET, MEMORY_REPORT,
)  # fmt: skip


def variables() -> dict[str, str]:
    """Every ``WASM_RUNNER_*`` variable of this process, by name (what the server's settings read)."""
    return {name: value for name, value in os.environ.items() if name.startswith(PREFIX)}
