"""Lock-file operations done by the ``pyodide-lock`` library, run under the pyodide-build Python.

``pyodide-lock`` (and ``pyodide-build``, which brings it) need Python 3.12 or newer, while the
project's own venv may be older, so this file is run as a script by that other interpreter
(``pyodide_tools.lock_tool``): one JSON request on stdin, one JSON answer on stdout. It imports
nothing from ``wasm_runner``.

Operations:

- ``read``: ``{"lock": PATH}`` → the lock as ``PyodideLockSpec`` reads it (schema-checked: an
  unknown key or a missing field is an error) plus ``raw_info`` (the ``info`` as written, since
  ``pyodide-lock`` drops the deprecated ``info.version`` when it writes).
- ``add_wheels``: ``{"lock": PATH, "wheels": [PATH...], "base": DIR}`` → the entries
  ``add_wheels_to_spec`` makes for those wheels (name, version, sha256, imports, depends checked
  against the lock and the other wheels), file names relative to ``base``.
- ``write``: ``{"lock": PATH, "packages": {...}, "out": PATH}`` → writes a lock with the info of
  ``lock`` and exactly ``packages`` (each entry validated as a ``PackageSpec``) to ``out``.

Errors are answered as ``{"error": MESSAGE}`` with exit status 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["handle", "main"]


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Carry out one request (see the module docstring) and return the answer."""
    from pyodide_lock import PackageSpec, PyodideLockSpec  # type: ignore[import-not-found,unused-ignore]
    from pyodide_lock.utils import add_wheels_to_spec  # type: ignore[import-not-found,unused-ignore]

    op = request.get("op")
    lock_path = Path(request["lock"])
    if op == "read":
        raw = json.loads(lock_path.read_text(encoding="utf-8"))
        spec = PyodideLockSpec.from_dict(raw)
        return {"lock": spec.to_dict(), "raw_info": raw.get("info", {})}
    spec = PyodideLockSpec.from_json(lock_path)
    if op == "add_wheels":
        base = Path(request["base"]).resolve()
        wheels = [Path(w).resolve() for w in request["wheels"]]
        files = {str(w.relative_to(base)) for w in wheels}
        new = add_wheels_to_spec(spec, wheels, base_path=base)
        return {
            "packages": {
                name: entry.to_dict() for name, entry in new.packages.items() if entry.file_name in files
            }
        }
    if op == "write":
        spec.packages = {
            name: PackageSpec.from_dict(entry) for name, entry in request["packages"].items()
        }
        spec.to_json(Path(request["out"]), indent=2)
        return {"written": request["out"]}
    raise ValueError(f"unknown operation {op!r}")


def main() -> int:
    try:
        answer = handle(json.load(sys.stdin))
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear answer
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 1
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
