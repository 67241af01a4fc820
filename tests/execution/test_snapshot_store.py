"""The paused sessions' folder (``execution.snapshot_store``), on a real file system: atomic
replacement, the per-key budget, another writer's files, and the orphan sweep (a writer is dead
when its lock is free)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wasm_runner.execution import SnapshotStore, SnapshotStoreFull


def test_put_read_replace_and_delete(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snaps", writer="w1", key_budget_bytes=1 << 20)
    try:
        assert store.put("sess_1", "alice", b"a" * 1000) == 1000
        assert store.put("sess_1", "alice", b"b" * 10) == 10  # replaced, not added
        assert store.read("sess_1") == b"b" * 10
        assert store.used("alice") == 10 and store.used("bob") == 0
        assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]
        assert stat.S_IMODE(os.stat(tmp_path / "snaps").st_mode) == 0o700
        store.delete("sess_1")
        with pytest.raises(FileNotFoundError):
            store.read("sess_1")
        assert store.used("alice") == 0
        with pytest.raises(ValueError):
            store.put("../escape", "alice", b"x")
    finally:
        store.close()


def test_a_key_over_its_budget_is_refused_and_its_old_snapshot_kept(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path, writer="w1", key_budget_bytes=100)
    try:
        store.put("one", "alice", b"1" * 60)
        with pytest.raises(SnapshotStoreFull) as refused:
            store.put("two", "alice", b"2" * 60)
        assert refused.value.code == "snapshot_budget" and "budget" in refused.value.message
        store.put("two", "bob", b"2" * 60)  # another key's budget is its own
        with pytest.raises(SnapshotStoreFull):
            store.put("one", "alice", b"1" * 101)
        assert store.read("one") == b"1" * 60  # the refused write changed nothing
    finally:
        store.close()


def test_orphans_are_swept_and_a_live_writers_files_are_not(tmp_path: Path) -> None:
    mine = SnapshotStore(tmp_path, writer="mine")
    alive = SnapshotStore(tmp_path, writer="alive")
    dead = SnapshotStore(tmp_path, writer="dead")
    try:
        mine.put("held", "t", b"h")
        mine.put("orphan", "t", b"o")
        alive.put("theirs", "t", b"x")
        dead.put("resumable", "t", b"r")
        dead.put("forgotten", "t", b"f")
        dead.close()  # its process is gone: the lock is free
        assert sorted(mine.dead_writer_files()) == [("dead", "forgotten"), ("dead", "resumable")]
        removed = mine.sweep(lambda sid: sid == "held", lambda w, sid: (w, sid) == ("dead", "resumable"))
        assert removed == 2
        assert mine.read("held") == b"h"
        assert alive.read("theirs") == b"x"
        assert mine.read("resumable", "dead") == b"r"
        for gone in (lambda: mine.read("orphan"), lambda: mine.read("forgotten", "dead")):
            with pytest.raises(FileNotFoundError):
                gone()
        # taken over: the file moves into this writer's folder, and the dead writer's folder goes
        mine.adopt("resumable", "t", "dead")
        assert mine.read("resumable") == b"r" and mine.used("t") == 2
        mine.sweep(lambda sid: sid in ("held", "resumable"))
        assert not (tmp_path / "dead").exists() and not (tmp_path / "dead.alive").exists()
    finally:
        mine.close()
        alive.close()
