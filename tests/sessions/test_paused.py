"""The paused sessions' folder (``sessions.paused``: ``PausedStore``), on a real file system: atomic
replacement, the per-key budget, another writer's files, and the orphan sweep (a writer is dead
when its lock is free); saved states: bound to their key, counted, expired, deleted."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from wasm_runner.sessions.paused import PausedStore, PausedStoreFull, SavedStateMissing


def test_put_read_replace_and_delete(tmp_path: Path) -> None:
    store = PausedStore(tmp_path / "snaps", writer="w1", key_budget_bytes=1 << 20)
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


def test_a_snapshot_with_its_folders_is_one_file_counted_whole_and_adopted_whole(tmp_path: Path) -> None:
    store = PausedStore(tmp_path, writer="w1", key_budget_bytes=100)
    other = PausedStore(tmp_path, writer="w2", key_budget_bytes=100)
    try:
        size = store.put("tool", "alice", b"s" * 40, b"f" * 30)
        assert size > 70 and store.used("alice") == size  # the folders count in the key's budget
        assert store.read_parts("tool") == (b"s" * 40, b"f" * 30)
        assert store.read("tool") == b"s" * 40  # the snapshot alone (a pause on this process)
        with pytest.raises(PausedStoreFull):  # over the budget with its folders: the old file stays
            store.put("tool", "alice", b"s" * 40, b"f" * 60)
        assert store.read_parts("tool") == (b"s" * 40, b"f" * 30)
        store.release("tool")  # handed over (a live writer gives its count up first)
        other.adopt("tool", "alice", "w1")  # another replica takes both over, in one move
        assert other.read_parts("tool") == (b"s" * 40, b"f" * 30) and other.used("alice") == size
        store.put("plain", "alice", b"p" * 10)
        assert store.read_parts("plain") == (b"p" * 10, None)
    finally:
        store.close()
        other.close()


def test_a_key_over_its_budget_is_refused_and_its_old_snapshot_kept(tmp_path: Path) -> None:
    store = PausedStore(tmp_path, writer="w1", key_budget_bytes=100)
    try:
        store.put("one", "alice", b"1" * 60)
        with pytest.raises(PausedStoreFull) as refused:
            store.put("two", "alice", b"2" * 60)
        assert refused.value.code == "snapshot_budget" and "budget" in refused.value.message
        store.put("two", "bob", b"2" * 60)  # another key's budget is its own
        with pytest.raises(PausedStoreFull):
            store.put("one", "alice", b"1" * 101)
        assert store.read("one") == b"1" * 60  # the refused write changed nothing
    finally:
        store.close()


def test_orphans_are_swept_and_a_live_writers_files_are_not(tmp_path: Path) -> None:
    mine = PausedStore(tmp_path, writer="mine")
    alive = PausedStore(tmp_path, writer="alive")
    dead = PausedStore(tmp_path, writer="dead")
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
        # the key's budget counts every writer's files: mine (2), alive's (1), and the dead
        # writer's count (its swept file, until its folder goes)
        assert mine.read("resumable") == b"r" and mine.used("t") == 4
        mine.sweep(lambda sid: sid in ("held", "resumable"))
        assert not (tmp_path / "dead").exists() and not (tmp_path / "dead.alive").exists()
        assert mine.used("t") == 3
    finally:
        mine.close()
        alive.close()


def test_saved_states_are_the_keys_own_counted_and_deletable(tmp_path: Path) -> None:
    store = PausedStore(tmp_path, writer="w1", key_budget_bytes=1000)
    try:
        saved = store.save_state("alice", b"s" * 300, b"f" * 100, profile="chat", runtime="default",
                                 lifetime_seconds=3600)  # fmt: skip
        assert saved.handle.startswith("saved_") and saved.size > 400
        got = store.load_state(saved.handle, "alice")
        assert (got.snapshot, got.files, got.profile, got.runtime) == (b"s" * 300, b"f" * 100, "chat", "default")
        assert 3590 < got.describe()["expires_in"] <= 3600  # type: ignore[operator]
        # another key: the same refusal as a handle never made, and nothing of it is touched
        with pytest.raises(SavedStateMissing) as foreign:
            store.load_state(saved.handle, "bob")
        assert foreign.value.reason == "unknown" and "another key" in str(foreign.value)
        assert not store.delete_state(saved.handle, "bob")
        for hostile in ("../w1", "", "x" * 200, "a/b"):
            with pytest.raises(SavedStateMissing):
                store.load_state(hostile, "alice")
        # saved states count in the key's budget with its paused sessions
        assert store.used("alice") == saved.size and store.used("bob") == 0
        with pytest.raises(PausedStoreFull) as full:
            store.put("sess", "alice", b"p" * (1000 - saved.size + 1))
        assert full.value.code == "snapshot_budget"
        store.put("sess", "alice", b"p" * 100)
        with pytest.raises(PausedStoreFull):
            store.save_state("alice", b"s" * 500, None, profile="chat", runtime="default", lifetime_seconds=60)
        assert store.delete_state(saved.handle, "alice")
        with pytest.raises(SavedStateMissing):
            store.load_state(saved.handle, "alice")
        assert store.used("alice") == 100
        no_files = store.save_state("alice", b"s", None, profile="p", runtime="small", lifetime_seconds=60)
        assert store.load_state(no_files.handle, "alice").files is None
    finally:
        store.close()


def test_expired_saved_states_are_refused_and_swept(tmp_path: Path) -> None:
    store = PausedStore(tmp_path, writer="w1")
    try:
        short = store.save_state("alice", b"a", None, profile="p", runtime="r", lifetime_seconds=0.2)
        swept = store.save_state("bob", b"b", None, profile="p", runtime="r", lifetime_seconds=0.2)
        kept = store.save_state("bob", b"c", None, profile="p", runtime="r", lifetime_seconds=3600)
        time.sleep(0.5)
        with pytest.raises(SavedStateMissing) as expired:
            store.load_state(short.handle, "alice")
        assert expired.value.reason == "expired" and "expired" in str(expired.value)
        with pytest.raises(SavedStateMissing) as gone:  # an expired state is deleted when refused
            store.load_state(short.handle, "alice")
        assert gone.value.reason == "unknown"
        assert store.sweep_saved() == 1  # bob's expired one; his live one stays
        assert store.load_state(kept.handle, "bob").snapshot == b"c"
        with pytest.raises(SavedStateMissing):
            store.load_state(swept.handle, "bob")
        # the writers' orphan sweep never takes the saved folder for a writer's
        assert store.sweep(lambda _: False) == 0 and store.dead_writer_files() == []
        assert store.load_state(kept.handle, "bob").snapshot == b"c"
    finally:
        store.close()


def test_a_keys_budget_counts_every_writers_folder(tmp_path: Path) -> None:
    """Replicas sharing the folder share one budget per key: each writer's paused sessions count
    in the others' checks, a deletion gives the bytes back to all, a snapshot taken over from a
    dead writer is counted once, and a dead writer's counts go with its folder."""
    one = PausedStore(tmp_path, writer="one", key_budget_bytes=100)
    two = PausedStore(tmp_path, writer="two", key_budget_bytes=100)
    try:
        one.put("a", "alice", b"a" * 60)
        assert two.used("alice") == 60 and two.used("bob") == 0
        with pytest.raises(PausedStoreFull) as refused:
            two.put("b", "alice", b"b" * 60)  # 120 in all: over, though two holds nothing
        assert refused.value.code == "snapshot_budget"
        two.put("b", "bob", b"b" * 60)  # another key's budget is its own
        one.delete("a")
        assert two.used("alice") == 0
        two.put("b2", "alice", b"b" * 60)
        # one dies; two takes its snapshot over: counted once
        one.put("c", "alice", b"c" * 30)
        assert two.used("alice") == 90
        one.close()
        two.adopt("c", "alice", "one")
        assert two.used("alice") == 90
        with pytest.raises(PausedStoreFull):
            two.put("d", "alice", b"d" * 20)
        assert two.sweep(lambda sid: True) == 0
        assert not (tmp_path / "one").exists() and not list((tmp_path / ".usage").glob("*/one"))
        # the key's saved states count across writers too
        three = PausedStore(tmp_path, writer="three", key_budget_bytes=100)
        try:
            with pytest.raises(PausedStoreFull):
                three.save_state("alice", b"s" * 20, None, profile="p", runtime="r", lifetime_seconds=60)
        finally:
            three.close()
    finally:
        one.close()
        two.close()


def test_two_saves_at_once_never_both_pass_a_budget_with_room_for_one(tmp_path: Path) -> None:
    """The check and the write are one step under the key's lock, across writers (each a
    separate lock file description, as separate processes would hold) and threads."""
    from concurrent.futures import ThreadPoolExecutor

    stores = [PausedStore(tmp_path, writer=f"w{i}", key_budget_bytes=100) for i in range(4)]
    try:
        for round_ in range(20):

            def save(i: int, round_: int = round_) -> bool:
                try:
                    stores[i % 4].put(f"s{round_}_{i}", "alice", b"x" * 60)
                except PausedStoreFull:
                    return False
                return True

            with ThreadPoolExecutor(8) as pool:
                fitted = list(pool.map(save, range(8)))
            assert fitted.count(True) == 1, (round_, fitted)
            assert stores[0].used("alice") == 60
            for i, ok in enumerate(fitted):
                if ok:
                    stores[i % 4].delete(f"s{round_}_{i}")
            assert stores[0].used("alice") == 0
    finally:
        for store in stores:
            store.close()
