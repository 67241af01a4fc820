"""Where the wheelhouse lives on the host: the operator's lock and the cache folder of checked
wheels and unpacked packages; which unpacked folders a run gets for the packages it asks for."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..cache import cache_dir
from ..environment import PACKAGES_LOCK
from ..runtimes import get_runtime, stdlib_dir
from .lock import LockedPackage, PackageLock
from .tiers import BrowserModules
from .wanted import PackageRefused, wanted_packages

__all__ = ["COMPLETE", "PackageStore", "default_store", "granted_packages", "image_modules", "runtime_image", "store_root"]

COMPLETE = ".complete"  # written last into an unpacked (and compiled) package's folder


def store_root() -> Path:
    """The cache folder of the wheelhouse: ``wheels/`` (checked files) and ``site/`` (unpacked)."""
    root = cache_dir() / "packages"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


@cache
def image_modules(runtime: str = "default") -> frozenset[str]:
    """The top-level modules the runtime's own library has (its stdlib archive: numpy, pandas,
    sympy... on the default runtime); a package of the lock whose modules are all there is taken
    from the image on the server tier, never mounted."""
    rt = get_runtime(runtime)
    folder = stdlib_dir(rt)
    if folder is None or rt.stdlib_name is None or not (folder / rt.stdlib_name).is_file():
        return frozenset()
    with zipfile.ZipFile(folder / rt.stdlib_name) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    return frozenset(t.removesuffix(".pyc").removesuffix(".py") for t in tops if not t.endswith(".dist-info"))


def runtime_image(runtime: str) -> frozenset[str]:
    """The image modules that serve a run of ``runtime`` instead of the wheelhouse (the default
    runtime's library; none for another runtime)."""
    return image_modules(runtime) if runtime == "default" else frozenset()


@dataclass(frozen=True)
class PackageStore:
    """The operator's lock (``lock_path``) and the cache folder ``root`` holding its packages."""

    lock_path: Path
    lock: PackageLock
    root: Path

    @classmethod
    def open(cls, lock_path: Path, root: Path | None = None) -> PackageStore:
        """The store of the lock in ``lock_path`` (``LockError`` when it cannot be read)."""
        return cls(lock_path, PackageLock.read(lock_path), root or store_root())

    def wheel_path(self, pkg: LockedPackage) -> Path:
        return self.root / "wheels" / pkg.wheel

    def folder(self, pkg: LockedPackage) -> Path:
        """The unpacked (and compiled) folder of ``pkg``, whether it exists yet or not."""
        return self.root / "site" / pkg.folder_name

    def is_ready(self, pkg: LockedPackage) -> bool:
        return (self.folder(pkg) / COMPLETE).is_file()

    @staticmethod
    def in_image(pkg: LockedPackage, modules: frozenset[str]) -> bool:
        """Whether the image has every module of ``pkg`` (then the image's copy serves it)."""
        return bool(pkg.imports) and all(m in modules for m in pkg.imports)

    def granted(self, code: str | bytes, explicit: Sequence[str] = (), *,
                image: frozenset[str] = frozenset(), browser: BrowserModules | None = None) -> list[LockedPackage]:
        """The packages a run of ``code`` gets: those it names (``explicit``, ``# requires:``) or
        imports, with what they require, except those the image has (``image``: its modules).
        ``PackageRefused`` for a name that is neither in the lock nor in the image (naming the
        browser tier when ``browser`` has it), or for a package of the lock not fetched yet
        (``wasm-runner packages fetch``)."""
        names = wanted_packages(self.lock, code, explicit, image_modules=image, browser=browser)
        packages = [p for p in self.lock.closure(names) if not self.in_image(p, image)]
        missing = [p.name for p in packages if not self.is_ready(p)]
        if missing:
            raise PackageRefused(
                f"The package{'s' if len(missing) > 1 else ''} {', '.join(missing)} {'are' if len(missing) > 1 else 'is'} "
                "allowed but not installed on this server yet: the operator runs `wasm-runner packages fetch`.")
        return packages

    def mounted(self, image: frozenset[str] = frozenset()) -> list[Path]:
        """The folders a run that was granted packages gets: every fetched package of the lock the
        image does not have. One set per lock, so one view of it whatever runs ask for (a view
        per combination asked would let callers fill the disk with views); every package of the
        lock is one the operator allowed, and a run that asks for none gets none."""
        return [self.folder(p) for p in self.lock.packages.values() if not self.in_image(p, image) and self.is_ready(p)]

    def folders_for(self, code: str | bytes, explicit: Sequence[str] = (), *,
                    image: frozenset[str] = frozenset()) -> list[Path]:
        """The folders a run of ``code`` gets: ``mounted`` when ``granted`` gives it any package."""
        return self.mounted(image) if self.granted(code, explicit, image=image) else []

def granted_packages(store: PackageStore | None, runtime: str, code: str | bytes, explicit: Sequence[str] = (),
                     browser: BrowserModules | None = None) -> list[LockedPackage]:
    """``store.granted`` for a run of ``runtime`` (its image: ``runtime_image``); with no
    wheelhouse (``store`` None) nothing, once the names asked are found to be the image's
    (``PackageRefused`` otherwise, naming the browser tier when ``browser`` has them)."""
    image = runtime_image(runtime)
    if store is None:
        wanted_packages(PackageLock({}), code, explicit, image_modules=image, browser=browser)
        return []
    return store.granted(code, explicit, image=image, browser=browser)


def default_store() -> PackageStore | None:
    """The store of ``$WASM_RUNNER_PACKAGES_LOCK`` (None when unset: no packages beyond the image)."""
    path = PACKAGES_LOCK.text()
    return PackageStore.open(Path(path)) if path else None
