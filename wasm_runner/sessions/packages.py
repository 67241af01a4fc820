"""A session's packages beyond the image (issue 37): the packages a session gets when it is
opened with ``packages`` (every fetched package of the operator's lock the image does not have,
mounted from its first cell, as a one-shot run granted packages gets: ``PackageStore.mounted``),
whether a cell's names and imports fit its session, and the folders for the names a snapshot of
it recorded when it is resumed (a fork, a paused session woken, a saved state, a snapshot)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..packages import PackageRefused, PackageStore, normalize
from ..packages.store import granted_packages, runtime_image
from ..packages.tiers import BrowserModules

__all__ = ["OpenedPackages", "check_cell", "opened_packages", "recorded_folders"]


@dataclass(frozen=True)
class OpenedPackages:
    """What a session opened with packages gets: ``names`` (``name==version``, with what they
    require; its snapshots record them) and ``folders`` (the unpacked folders mounted)."""

    names: tuple[str, ...] = ()
    folders: tuple[Path, ...] = ()


def opened_packages(store: PackageStore | None, runtime: str, asked: Sequence[str],
                    browser: BrowserModules | None = None) -> OpenedPackages:
    """The packages a session that asks for ``asked`` gets (none when the image has them all);
    ``PackageRefused`` (the sentence its user sees) for a name neither the lock nor the image has
    (naming the browser tier when ``browser`` has it)."""
    if not asked:
        return OpenedPackages()
    granted = granted_packages(store, runtime, "", asked, browser)
    if not granted or store is None:
        return OpenedPackages()
    return OpenedPackages(tuple(f"{p.name}=={p.version}" for p in granted), tuple(store.mounted(runtime_image(runtime))))


def check_cell(store: PackageStore | None, runtime: str, opened: Sequence[str], code: str | bytes,
               asked: Sequence[str], browser: BrowserModules | None = None) -> None:
    """A cell's packages, named (``asked``, ``# requires:``) or imported: ``PackageRefused`` for
    one the lock does not have, and for any of the lock's when its session was opened without
    packages (its instance has no view of them). A session opened with packages sees the whole
    wheelhouse (every package of the lock it was given at its start)."""
    granted = granted_packages(store, runtime, code, asked, browser)
    if granted and not opened:
        names = sorted({p.name for p in granted} - {r for p in granted for r in p.requires})  # not what they require
        listed = ", ".join(f'"{n}"' for n in names)
        raise PackageRefused(
            f"This session was opened without packages, so its cells cannot use {', '.join(names)}: "
            f"open a new session with \"packages\": [{listed}] (POST /api/sessions).")


def recorded_folders(store: PackageStore | None, runtime: str) -> Callable[[list[str]], Sequence[Path]]:
    """For ``Sandbox.resume``: the folders for the packages a snapshot's session had
    (``name==version``); ``PackageRefused`` naming those this server's lock no longer has (or
    has in another version, or has not fetched)."""

    def folders(names: list[str]) -> Sequence[Path]:
        gone = []
        for recorded in names:
            name, _, version = recorded.partition("==")
            pkg = store.lock.packages.get(normalize(name)) if store is not None else None
            if pkg is None or pkg.version != version or not store.is_ready(pkg):  # type: ignore[union-attr]
                gone.append(recorded)
        if gone:
            has = ", ".join(f"{p.name}=={p.version}" for p in store.lock.packages.values()) if store else ""
            raise PackageRefused(
                f"The session was saved with package{'s' if len(gone) > 1 else ''} {', '.join(gone)}, which "
                f"this server's package lock no longer has (it has {has or 'no packages'}): open a new "
                "session, or ask the operator to put it back in the lock.")
        assert store is not None
        return store.mounted(runtime_image(runtime))

    return folders
