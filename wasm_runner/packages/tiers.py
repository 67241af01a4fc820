"""Which tier has a package: the server tier (the image's library and the operator's lock) and the
browser tier (the Pyodide package index the server serves). A refusal names the tier that has the
package ("numpy is on the server tier: run there, or choose auto") or says that no tier has it;
the browser tier's worker says the same from ``tier_modules`` (served as ``/tier-modules.json``).

The core does not read the browser's index itself: the part that serves it (``wasm_runner.browser``)
gives a ``BrowserModules`` source to the server it assembles, which hands it to its ``Executor``
(and so to its sessions); where no such source is given (the CLI, the MCP server on stdio, tests of
the core) the browser tier is taken to have nothing. Two servers in one process each see their own."""

from __future__ import annotations

from collections.abc import Callable

from .lock import PackageLock

__all__ = ["TIER_MODULES_PATH", "BrowserModules", "browser_modules", "server_modules", "tier_modules"]

TIER_MODULES_PATH = "/tier-modules.json"

# what gives the browser tier's importable modules and package names (read when first needed)
BrowserModules = Callable[[], frozenset[str]]


def browser_modules(source: BrowserModules | None) -> frozenset[str]:
    """The browser tier's modules and package names from ``source`` (empty without one, or when
    the web assets it reads are missing or unreadable)."""
    try:
        return source() if source is not None else frozenset()
    except (OSError, ValueError, KeyError, RuntimeError):  # web assets missing or unreadable
        return frozenset()


def server_modules(image: frozenset[str], lock: PackageLock | None) -> frozenset[str]:
    """The server tier's importable top-level modules: the image's and the lock's (modules and
    canonical package names, so a name given either way is found)."""
    names = set(image)
    if lock is not None:
        for pkg in lock.packages.values():
            names.add(pkg.name)
            names.update(pkg.imports)
    return frozenset(names)


def tier_modules(image: frozenset[str], lock: PackageLock | None,
                 browser: BrowserModules | None) -> dict[str, list[str]]:
    """The JSON the browser tier's worker fetches once: each tier's modules, sorted, and the
    packages of the operator's lock (the refusal that no tier has a package lists them)."""
    return {"server": sorted(server_modules(image, lock)), "browser": sorted(browser_modules(browser)),
            "lock": sorted(lock.packages) if lock is not None else []}

