"""Which packages of the lock a program asks for: the names it is given (``packages=[...]``), its
``# requires: sympy, rich`` comment lines, and the modules it imports (read with ``ast`` on the
host, before the run). A name the lock does not have is refused with one sentence that names it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from ..errors import WasmRunnerError
from .lock import PackageLock, normalize
from .tiers import BrowserModules, browser_modules

__all__ = ["PackageRefused", "imported_modules", "not_allowed", "required_in_comments", "wanted_packages"]

_REQUIRES = re.compile(r"^[ \t]*#[ \t]*requires:[ \t]*(?P<names>.*)$", re.MULTILINE)
_SPLIT = re.compile(r"[\s,]+")
# what a requires line names: a package name (a word like "3.12" or "Python" is a comment's prose)
_PACKAGE = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")
_NOT_PACKAGES = frozenset({"python", "python3"})
MAX_NAMES = 64


class PackageRefused(WasmRunnerError, ValueError):
    """A run asked for a package it may not have; the message is the sentence its user sees."""


def required_in_comments(code: str) -> list[str]:
    """The package names of ``# requires: a, b`` lines (a playground program's way of asking);
    words that are no package name (``# requires: Python 3.12``) are left out."""
    names: list[str] = []
    for match in _REQUIRES.finditer(code):
        names += [n for n in _SPLIT.split(match["names"].split("#")[0])
                  if _PACKAGE.match(n) and n.lower() not in _NOT_PACKAGES]
    return names


def imported_modules(code: str) -> set[str]:
    """The top-level modules ``code`` imports anywhere (absolute imports); empty when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def not_allowed(names: Iterable[str], lock: PackageLock, browser: BrowserModules | None = None) -> str:
    """The sentence for ``names`` that neither the lock nor the image has: the browser tier has
    them ("...it is on the browser tier: run there, or choose auto"; ``browser`` gives its modules,
    None: the browser tier has nothing), or no tier has them."""
    names = sorted(set(names))
    in_browser = browser_modules(browser)
    elsewhere = [n for n in names if n in in_browser or normalize(n) in in_browser]
    if elsewhere == names:
        them = "they are" if len(names) > 1 else "it is"
        return (f"{', '.join(names)} {'are' if len(names) > 1 else 'is'} not on the server tier; {them} "
                "on the browser tier: run there, or choose auto.")
    nowhere = [n for n in names if n not in elsewhere]
    offered = ", ".join(sorted(lock.packages)) or "none"
    which = f"packages {', '.join(nowhere)} are" if len(nowhere) > 1 else f"package {nowhere[0]} is"
    also = (f" {', '.join(elsewhere)} {'are' if len(elsewhere) > 1 else 'is'} on the browser tier only."
            if elsewhere else "")
    return (f"The {which} not allowed on this server (server tier and browser tier alike): "
            f"the operator's wheelhouse has {offered}. Ask the operator to add it to the package lock.{also}")


def wanted_packages(lock: PackageLock, code: str | bytes, explicit: Sequence[str] = (), *,
                    image_modules: frozenset[str] = frozenset(), browser: BrowserModules | None = None) -> list[str]:
    """The canonical names of the lock's packages a run of ``code`` gets. Names given (``explicit``)
    or in ``# requires:`` lines must be in the lock or be modules the image has already
    (``image_modules``); ``PackageRefused`` otherwise (naming the browser tier when ``browser``
    has them). Imports of the lock's modules add their
    package; other imports are left to the run (a module of the image, or the program's own)."""
    if isinstance(code, bytes):
        code = code.decode("utf-8", "replace")
    asked = list(explicit) + required_in_comments(code)
    if len(asked) > MAX_NAMES:
        raise PackageRefused(f"A run may ask for at most {MAX_NAMES} packages; this one asks for {len(asked)}.")
    names: set[str] = set()
    refused = []
    for raw in asked:
        name = normalize(raw.split("==")[0].strip())
        if name in lock.packages:
            names.add(name)
        elif raw.strip() in image_modules or name in image_modules:
            continue
        else:
            refused.append(raw.strip())
    if refused:
        raise PackageRefused(not_allowed(refused, lock, browser))
    owners = lock.module_owner()
    if owners:  # no wheelhouse: the program is not parsed
        names.update(owners[m] for m in imported_modules(code) if m in owners and m not in image_modules)
    return sorted(names)
