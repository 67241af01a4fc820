"""Where the browser tier's files are: the ``web/`` folder, the wheelhouse, the Pyodide version
and the package index compiled packages come from (settings: ``WASM_RUNNER_WEB_DIR``,
``WASM_RUNNER_WHEELHOUSE``, ``WASM_RUNNER_PYODIDE_INDEX_URL``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..environment import PYODIDE_INDEX_URL, WEB_DIR, WHEELHOUSE

__all__ = [
    "OFFICIAL_INDEX_TEMPLATE",
    "package_index_url",
    "pyodide_version",
    "web_dir",
    "wheelhouse_dir",
]

OFFICIAL_INDEX_TEMPLATE = "https://cdn.jsdelivr.net/pyodide/v{version}/full/"


def web_dir() -> Path:
    """The ``web/`` folder holding ``src/``, ``dist/``, ``templates/`` and ``node_modules/``."""
    configured = WEB_DIR.text()
    return (
        Path(configured)
        if configured
        else Path(__file__).resolve().parents[2] / "web"
    )


def wheelhouse_dir(root: Path) -> Path:
    """Where ``wasm-runner wheelhouse`` puts wheels: ``WASM_RUNNER_WHEELHOUSE`` or ``web/wheelhouse``."""
    configured = WHEELHOUSE.text()
    return Path(configured) if configured else root / "wheelhouse"


def pyodide_version(root: Path) -> str:
    """The version of the Pyodide npm package installed under ``root``."""
    package = root / "node_modules" / "pyodide" / "package.json"
    return str(json.loads(package.read_text())["version"])


def package_index_url(version: str) -> str:
    """Where compiled packages come from: the setting, else the official index for ``version``."""
    configured = PYODIDE_INDEX_URL.raw()
    if configured is not None:
        configured = configured.strip()
        return (
            configured
            if not configured or configured.endswith("/")
            else configured + "/"
        )
    return OFFICIAL_INDEX_TEMPLATE.format(version=version)
