"""Packages beyond the image: the operator's wheelhouse (issue 37, part 2).

The operator pins pure-Python wheels in a lock file (``lock``: name, version, wheel, sha256, the
modules each provides); ``wasm-runner packages fetch`` downloads exactly those files at install
time, checks their hashes, unpacks each once into the cache and compiles it in the guest
(``fetching``, ``wheels``). A run asks for packages by name (``packages=[...]`` on the HTTP API,
MCP and CLI), by a ``# requires:`` line, or by importing one of their modules (``wanted``); the
store (``store``) turns that into the unpacked folders the sandbox mounts read-only
(``sandbox.site_mount``). A name the lock does not have is refused in one sentence
(``PackageRefused``), naming the tier that has it (``tiers``: what each tier can import, also
served to the browser tier's worker). The browser tier installs the same wheels through micropip
(docs/browser.md).
"""

from .lock import LockedPackage, LockError, PackageLock, normalize
from .store import PackageStore, default_store
from .wanted import PackageRefused, wanted_packages

__all__ = [
    "LockError",
    "LockedPackage",
    "PackageLock",
    "PackageRefused",
    "PackageStore",
    "default_store",
    "normalize",
    "wanted_packages",
]
