"""Sealing format version 6 (``wasm_runner/sandbox/sealing.py``): a snapshot bound to a user of
its owner and given an expiry, both in its authenticated header; version 4 still written and
read when neither is given. Header checks only: nothing here runs a sandbox."""

from __future__ import annotations

import os
import time

import pytest

from wasm_runner.sandbox import sealing
from wasm_runner.sandbox.sealing import SnapshotRefused, open_sealed, read_label, seal

SECRET = os.urandom(32)
IMAGE = "ab" * 32


def refused(blob: bytes, **kw: object) -> str:
    with pytest.raises(SnapshotRefused) as info:
        read_label(blob, secret=SECRET, **kw)  # type: ignore[arg-type]
    return info.value.reason


def test_a_snapshot_bound_to_a_user_and_an_expiry_opens_only_for_them() -> None:
    later = time.time() + 60
    blob = seal(b"body", owner="page\0key\0k1", user="u1", expires_at=later, secret=SECRET, image=IMAGE,
                profile="quick", runtime="default")  # fmt: skip
    label = read_label(blob, owner="page\0key\0k1", user="u1", secret=SECRET, need_expiry=True)
    assert (label.profile, label.version, label.expires_at) == ("quick", sealing.BOUND_VERSION, int(later))
    assert open_sealed(blob, owner="page\0key\0k1", user="u1", secret=SECRET, image=IMAGE) == b"body"
    assert refused(blob, owner="page\0key\0k1", user="u2") == "user"
    assert refused(blob, owner="page\0key\0k1") == "user"  # no user where one was bound
    assert refused(blob, owner="page\0key\0k2", user="u1") == "foreign"  # the same name, another key
    with pytest.raises(SnapshotRefused) as info:
        open_sealed(blob, owner="page\0key\0k1", user="u2", secret=SECRET, image=IMAGE)
    assert info.value.reason == "user"


def test_the_expiry_is_authenticated_and_enforced() -> None:
    past = seal(b"body", owner="o", expires_at=time.time() - 1, secret=SECRET, image=IMAGE)
    assert refused(past, owner="o") == "expired"
    with pytest.raises(SnapshotRefused) as info:
        open_sealed(past, owner="o", secret=SECRET, image=IMAGE)
    assert info.value.reason == "expired" and "expired at" in str(info.value)
    # moving the expiry (8 bytes after the body length) is tampering
    fresh = bytearray(seal(b"body", owner="o", expires_at=time.time() + 60, secret=SECRET, image=IMAGE))
    at = sealing._FIXED.size - 2  # the v4 fixed part up to its lengths: where v6 puts `expires`
    fresh[at:at + 8] = (2**40).to_bytes(8, "little")
    assert refused(bytes(fresh), owner="o") == "tampered"


def test_version_4_is_still_written_without_a_user_or_expiry_and_refused_where_one_is_needed() -> None:
    old = seal(b"body", owner="alice", secret=SECRET, image=IMAGE)
    assert read_label(old, owner="alice", secret=SECRET).version == sealing.FORMAT_VERSION == 4
    assert open_sealed(old, owner="alice", secret=SECRET, image=IMAGE) == b"body"
    assert refused(old, owner="alice", need_expiry=True) == "version"
    unlimited = seal(b"body", owner="alice", user="u", secret=SECRET, image=IMAGE)  # v6, no expiry
    assert refused(unlimited, owner="alice", user="u", need_expiry=True) == "expired"
