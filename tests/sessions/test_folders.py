"""A saved session's private folders (``sessions.folders``): packed and sealed for the key,
unpacked into fresh folders; an authenticated body is still checked before anything is written
(paths outside data/ and out/, links, sizes that do not add up)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from wasm_runner.sessions.folders import FOLDERS_TAG, seal_folders, unseal_folders
from wasm_runner.sandbox.sealing import SnapshotRefused, seal

SECRET = b"a test secret of 32 bytes, fixed"


def _fresh(tmp_path: Path, name: str) -> tuple[Path, Path]:
    data, out = tmp_path / name / "data", tmp_path / name / "out"
    data.mkdir(parents=True)
    out.mkdir()
    return data, out


def test_folders_round_trip_for_their_key_only(tmp_path: Path) -> None:
    root = tmp_path / "session"
    (root / "data").mkdir(parents=True)
    (root / "out" / "plots").mkdir(parents=True)
    (root / "data" / "sales.csv").write_bytes(b"a,b\n1,2\n")
    (root / "out" / "plots" / "p.png").write_bytes(b"\x89PNG" + bytes(range(256)))
    (root / "out" / "link").symlink_to("/etc/passwd")  # left out: only files and folders
    blob = seal_folders(root, owner="alice", secret=SECRET)
    assert b"a,b\n1,2" not in blob  # encrypted
    data, out = _fresh(tmp_path, "resumed")
    assert unseal_folders(blob, owner="alice", secret=SECRET, data_dir=data, out_dir=out) == 8
    assert (data / "sales.csv").read_bytes() == b"a,b\n1,2\n"
    assert (out / "plots" / "p.png").read_bytes() == b"\x89PNG" + bytes(range(256))
    assert sorted(os.listdir(out)) == ["plots"]
    other_data, other_out = _fresh(tmp_path, "bob")
    with pytest.raises(SnapshotRefused) as refused:
        unseal_folders(blob, owner="bob", secret=SECRET, data_dir=other_data, out_dir=other_out)
    assert refused.value.reason == "foreign" and os.listdir(other_data) == []


def _body(entries: list[list[object]], payload: bytes) -> bytes:
    head = json.dumps(entries).encode()
    return seal(struct.pack("<I", len(head)) + head + payload, owner="alice", secret=SECRET, image=FOLDERS_TAG)


@pytest.mark.parametrize("entries", [
    [["data/../../escape.txt", "f", 1]],
    [["/etc/x", "f", 1]],
    [["scratch/x", "f", 1]],
    [["data/a\x00b", "f", 1]],
    [["data/x", "l", 1]],
    [["data/x", "f", 5]],  # more than the body holds
])  # fmt: skip
def test_a_hostile_but_authenticated_body_writes_nothing_outside(tmp_path: Path, entries: list[list[object]]) -> None:
    data, out = _fresh(tmp_path, "target")
    with pytest.raises(ValueError):
        unseal_folders(_body(entries, b"x"), owner="alice", secret=SECRET, data_dir=data, out_dir=out)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "target" / "escape.txt").exists()
    assert os.listdir(data) == [] and os.listdir(out) == []
