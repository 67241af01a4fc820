"""The test set-up's wheelhouse, built as an operator builds one: ``wasm-runner packages lock``
pins the requirements from the package index pip is configured with (as for the project's own
install), ``fetch`` downloads the locked files, checks their sha256, unpacks and compiles them
into the cache folder (shared with the compiled modules: a second session finds them ready).

``markdown-it-py`` (with ``mdurl``) is not in the default runtime's image: the server tier mounts
it. ``sympy`` (with ``mpmath``) is in the image: the server tier takes the image's, the browser
tier the wheelhouse's. ``requests`` (with ``urllib3``, ``idna``, ``certifi`` and
``charset-normalizer``) is in no image: the network tests mount it (``tests/network/test_requests.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["REQUIREMENTS", "build_lock"]

REQUIREMENTS = ("markdown-it-py==4.2.0", "sympy==1.14.0", "requests==2.34.2", "urllib3==2.8.0", "idna==3.21",
                "certifi==2026.10.19.post1", "charset-normalizer==3.5.3")
WASM_RUNNER = str(Path(sys.executable).with_name("wasm-runner"))


def build_lock(folder: Path) -> Path:
    """The lock file of ``REQUIREMENTS`` in ``folder``, its packages fetched and ready."""
    lock = folder / "packages.lock.json"
    for argv in (["lock", *REQUIREMENTS], ["fetch"]):
        done = subprocess.run([WASM_RUNNER, "packages", "--lock", str(lock), *argv], capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr
    return lock
