"""Session snapshots (issue 25, items 1 and 5): a resting session saved with ``Session.snapshot``
continues exactly after ``Sandbox.resume`` (variables, imported modules, files, open files,
random state), and a tampered, foreign or other-version snapshot is refused before use."""

from __future__ import annotations

import gc
import json
import os
import struct

import pytest

from wasm_runner import Sandbox, WasmRunnerError
from wasm_runner.sandbox import sealing
from wasm_runner.sandbox.sealing import SnapshotRefused, read_label, seal
from wasm_runner.sandbox.session_state import SnapshotFailed, State

SECRET = b"a test secret of 32 bytes ......"

CELL_1 = """\
import random, json, collections
random.seed(2026)
counts = collections.Counter('abracadabra')
def twice(v):
    return 2 * v
with open('/scratch/notes.txt', 'w') as f:
    f.write('kept')
log = open('/scratch/log.txt', 'w')
log.write('one,')
print(random.random())
"""

AFTER = """\
import sys
log.write('two')
log.close()
print(json.dumps({'counts': counts.most_common(1), 'twice': twice(21), 'random': random.random(),
                  'notes': open('/scratch/notes.txt').read(), 'log': open('/scratch/log.txt').read(),
                  'upload': open('/scratch/data/in.csv').read(),
                  'modules': all(m in sys.modules for m in ('json', 'collections'))}))
"""


def test_a_resumed_session_continues_exactly(default_sandbox: Sandbox) -> None:
    s = default_sandbox.session()
    try:
        first = s.run(CELL_1)
        assert first.ok, first.stderr
        s.upload("data/in.csv", b"a,b\n1,2\n")
        snap = s.snapshot(owner="key-a", secret=SECRET)
        assert isinstance(snap, bytes)
        original = s.run(AFTER)  # the session itself goes on after its snapshot
        assert original.ok, original.stderr
    finally:
        s.close()
    resumed = default_sandbox.resume(snap, owner="key-a", secret=SECRET)
    try:
        got = resumed.run(AFTER)
        assert got.ok, got.stderr
        state = json.loads(got.stdout)
        assert state == json.loads(original.stdout)  # the same random number too
        assert state["counts"] == [["a", 5]] and state["twice"] == 42
        assert state["notes"] == "kept" and state["log"] == "one,two" and state["modules"]
        assert state["upload"] == "a,b\n1,2\n"
        # a second resume of the same snapshot is independent of the first
        other = default_sandbox.resume(snap, owner="key-a", secret=SECRET)
        try:
            assert resumed.run("twice = None; print('changed')").ok
            again = other.run("print(twice(4))")
            assert again.ok and again.stdout == "8\n", again.stderr
        finally:
            other.close()
    finally:
        resumed.close()


def test_a_snapshot_before_any_cell_and_after_an_error(default_sandbox: Sandbox) -> None:
    with default_sandbox.session() as s:
        empty = s.snapshot(owner="k", secret=SECRET)
        assert s.run("x = 1\nraise ValueError('kept alive')").exit_code == 1
        snap = s.snapshot(owner="k", secret=SECRET, compress=False)  # stored as it is (codec 0)
    with default_sandbox.resume(empty, owner="k", secret=SECRET) as fresh:
        r = fresh.run("print('x' in globals())")
        assert r.ok and r.stdout == "False\n", r.stderr
    with default_sandbox.resume(snap, owner="k", secret=SECRET) as later:
        r = later.run("print(x)")
        assert r.ok and r.stdout == "1\n", r.stderr


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:]


def test_tampered_foreign_and_other_version_snapshots_are_refused(default_sandbox: Sandbox) -> None:
    with default_sandbox.session() as s:
        assert s.run("secret_value = 'alice only ' * 4").ok
        snap = s.snapshot(owner="alice", secret=SECRET)
        raw = s.snapshot(owner="alice", secret=SECRET, compress=False)
    # encrypted at rest: the session's data is not in the bytes, compressed or not
    assert b"alice only alice only" not in snap and b"alice only alice only" not in raw
    cases = {
        "tampered": (_flip(snap, len(snap) // 2), "alice", SECRET),
        "tampered-mac": (_flip(snap, len(snap) - 1), "alice", SECRET),
        "foreign-owner": (snap, "bob", SECRET),
        "foreign-secret": (snap, "alice", b"another secret, 32 bytes long .."),
        "version-1": (snap[:8] + struct.pack("<H", 1) + snap[10:], "alice", SECRET),
        "version-2": (snap[:8] + struct.pack("<H", 2) + snap[10:], "alice", SECRET),
        "version-3": (snap[:8] + struct.pack("<H", 3) + snap[10:], "alice", SECRET),
        "version-5": (snap[:8] + struct.pack("<H", 5) + snap[10:], "alice", SECRET),
        "truncated": (snap[: len(snap) - 100], "alice", SECRET),
        "junk": (b"not a snapshot at all, just some bytes here.................", "alice", SECRET),
    }
    reasons, messages = {}, {}
    for name, (blob, owner, secret) in cases.items():
        with pytest.raises(SnapshotRefused) as info:
            default_sandbox.resume(blob, owner=owner, secret=secret)
        assert isinstance(info.value, WasmRunnerError) and isinstance(info.value, ValueError)
        reasons[name], messages[name] = info.value.reason, str(info.value)
    assert reasons == {"tampered": "tampered", "tampered-mac": "tampered", "foreign-owner": "foreign",
                       "foreign-secret": "foreign", "version-1": "version", "version-2": "version",
                       "version-3": "version", "version-5": "version",
                       "truncated": "size", "junk": "format"}
    assert "version 1 (not encrypted" in messages["version-1"] and "save the session again" in messages["version-1"]
    assert "version 2 (" in messages["version-2"] and "reads version 4 only" in messages["version-2"]
    assert "version 3 (without its profile" in messages["version-3"] and "save the session again" in messages["version-3"]
    # the host is unharmed: the same snapshot still resumes for its owner, and runs go on
    with default_sandbox.resume(snap, owner="alice", secret=SECRET) as s:
        r = s.run("print(secret_value)")
        assert r.ok and r.stdout == "alice only " * 4 + "\n"
    assert default_sandbox.run("print(1 + 1)").stdout == "2\n"


def test_the_profile_is_in_the_authenticated_header(default_sandbox: Sandbox) -> None:
    """A snapshot says which profile and runtime it was made under (read without decrypting its
    body); changing them is refused as tampering, by the label's reader and by resume."""
    with default_sandbox.session() as s:
        assert s.run("kept = 5").ok
        snap = s.snapshot(owner="alice", secret=SECRET, profile="analyst")
        plain = s.snapshot(owner="alice", secret=SECRET)
    label = read_label(snap, owner="alice", secret=SECRET)
    assert (label.profile, label.runtime) == ("analyst", "default")
    assert read_label(plain, owner="alice", secret=SECRET).profile == ""
    at = snap.index(b"analyst")  # in clear: a name, not a secret
    renamed = snap[:at] + b"student" + snap[at + 7:]
    for reader in (lambda b: read_label(b, owner="alice", secret=SECRET),
                   lambda b: default_sandbox.resume(b, owner="alice", secret=SECRET)):
        with pytest.raises(SnapshotRefused) as info:
            reader(renamed)
        assert info.value.reason == "tampered"
    with pytest.raises(SnapshotRefused) as foreign:
        read_label(snap, owner="bob", secret=SECRET)
    assert foreign.value.reason == "foreign"
    with pytest.raises(ValueError):
        seal(b"body", owner="alice", secret=SECRET, image=default_sandbox.snapshot_image, profile="p" * 256)
    with default_sandbox.resume(snap, owner="alice", secret=SECRET) as s:
        assert s.run("print(kept)").stdout == "5\n"


def test_authenticated_but_hostile_content_is_refused(default_sandbox: Sandbox) -> None:
    """Even a body that authenticates (a leaked secret, a bug) is bounded before it is used."""
    image = default_sandbox.snapshot_image

    def body(header: dict[str, object], tail: bytes = b"") -> bytes:
        head = json.dumps(header).encode()
        return b"WRST" + struct.pack("<I", len(head)) + head + tail

    base = {"memory_pages": 700, "changed": [], "layout": [], "fds": [], "next_fd": 3, "files": [],
            "limits": {}, "outbuf": None, "tick": None}
    hostile = [
        dict(base, memory_pages=1 << 20),  # more memory than any sandbox allows
        dict(base, changed=[[5, 1], [3, 1]]),  # pages out of order, and no data for them
        dict(base, files=[["/scratch", "../escape.txt", "f", 1]]),
        dict(base, files=[["/etc", "passwd", "f", 1]]),
    ]
    for header in hostile:
        blob = seal(body(header, b"x"), owner="k", secret=SECRET, image=image)
        with pytest.raises(SnapshotRefused) as info:
            default_sandbox.resume(blob, owner="k", secret=SECRET)
        assert info.value.reason == "state"
    assert default_sandbox.run("print('still here')").stdout == "still here\n"


def _sealed(packed: bytes, declared: int, *, codec: int = sealing.ZSTD, owner: str = "k", image: str) -> bytes:
    """A snapshot that authenticates (as a leaked secret or a bug would make it) whose body is
    ``packed`` and whose header says it inflates to ``declared`` bytes."""
    salt, nonce = os.urandom(16), os.urandom(12)
    fixed = sealing._FIXED.pack(sealing.MAGIC, sealing.FORMAT_VERSION, codec, sealing._tag(SECRET, b"owner", owner)[:16],
                                bytes.fromhex(image)[:16], salt, nonce, declared, 0, 0)
    head = fixed + sealing._TAIL.pack(sealing._header_tag(SECRET, owner, fixed), len(packed) + 16)
    return head + sealing._key(SECRET, salt, owner).encrypt(nonce, packed, head)


def test_a_snapshot_that_inflates_past_its_bounds_is_refused(default_sandbox: Sandbox) -> None:
    """Compression bombs: the declared size is checked against the resuming sandbox's limits
    before decryption, the frame's own size against the declared one before inflating, and
    what came out after; none of them allocates what it claims."""
    import zstandard

    from wasm_runner.limits import Limits

    image = default_sandbox.snapshot_image
    mib = 1 << 20
    zeros = bytes(64 * mib)
    bomb = zstandard.ZstdCompressor(level=1).compress(zeros)  # 64 MiB in a few KiB
    unsized = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(zeros)
    wide = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(
        window_log=25, compression_level=1)).compress(bytes(16 * mib))  # asks a 16 MiB window
    assert len(bomb) < 64 * 1024 and len(unsized) < 64 * 1024
    small = Limits(memory_mb=64, disk_mb=1)
    cases = {  # name: (snapshot, within, reason)
        "declared-over-limits": (_sealed(bomb, 256 * mib, image=image), small, "size"),
        "declared-over-max": (_sealed(bomb, sealing.MAX_BODY_BYTES + 1, image=image), None, "size"),
        "frame-larger-than-declared": (_sealed(bomb, mib, image=image), None, "size"),
        "frame-without-size": (_sealed(unsized, mib, image=image), None, "size"),
        "wide-window": (_sealed(wide, 16 * mib, image=image), None, "size"),
        "trailing-data": (_sealed(zstandard.ZstdCompressor().compress(b"x" * 100) + b"more", 100, image=image),
                          None, "state"),
        "not-a-frame": (_sealed(b"\x00" * 100, 100, image=image), None, "state"),
        "raw-not-declared-size": (_sealed(b"WRST" + bytes(100), 50, codec=sealing.RAW, image=image), None, "size"),
    }
    reasons, messages = {}, {}
    for name, (blob, within, _) in cases.items():
        with pytest.raises(SnapshotRefused) as info:
            default_sandbox.resume(blob, owner="k", secret=SECRET, within=within)
        reasons[name], messages[name] = info.value.reason, str(info.value)
    assert reasons == {name: reason for name, (_, _, reason) in cases.items()}
    assert "256 MiB, over the" in messages["declared-over-limits"] and "limits allow" in messages["declared-over-limits"]
    assert "declared size" in messages["frame-larger-than-declared"]
    # the same bomb with its true size declared inflates (64 MiB, within the default bound) and is
    # then refused as content, not as a crash
    with pytest.raises(SnapshotRefused) as info:
        default_sandbox.resume(_sealed(bomb, 64 * mib, image=image), owner="k", secret=SECRET)
    assert info.value.reason == "state"
    # the host is unharmed, and a real snapshot still resumes within a profile's limits
    with default_sandbox.session() as s:
        assert s.run("kept = 'yes'").ok
        snap = s.snapshot(owner="k", secret=SECRET)
    with default_sandbox.resume(snap, owner="k", secret=SECRET, within=Limits()) as again:
        assert again.run("print(kept)").stdout == "yes\n"


def test_a_note_goes_with_the_snapshot(default_sandbox: Sandbox) -> None:
    """``snapshot(note=...)`` (a server notes the calls a snapshot holds) is the resumed
    session's ``note``; a fork or a fresh session has none; a note that is not names with whole
    numbers is refused as content."""
    with default_sandbox.session() as s:
        assert s.note == {} and s.run("v = 7").ok
        snap = s.snapshot(owner="k", secret=SECRET, note={"calls": 3})
        (copy,) = s.fork(1)
        with copy:
            assert copy.note == {}
    with default_sandbox.resume(snap, owner="k", secret=SECRET) as again:
        assert again.note == {"calls": 3} and again.run("print(v)").stdout == "7\n"
    with default_sandbox.session() as s:
        for bad in ({"calls": "3"}, {"calls": 1.5}, {f"n{i}": i for i in range(9)}):
            with pytest.raises(SnapshotRefused) as info:
                default_sandbox.resume(s.snapshot(owner="k", secret=SECRET, note=bad),  # type: ignore[arg-type]
                                       owner="k", secret=SECRET)
            assert info.value.reason == "state" and "note" in str(info.value)
    assert default_sandbox.run("print('still here')").stdout == "still here\n"


def test_an_ended_session_and_a_command_runtime_cannot_be_saved(default_sandbox: Sandbox) -> None:
    from wasm_runner.limits import Limits
    from wasm_runner.sandbox import SessionEnded

    s = default_sandbox.session(limits=Limits(cpu_seconds=1, wall_seconds=2))
    try:
        assert s.run("while True: pass").limit is not None
        with pytest.raises(SessionEnded):
            s.snapshot(owner="k", secret=SECRET)
    finally:
        s.close()
    small = Sandbox("small", prestart=0)
    try:
        with small.session() as cmd:
            assert cmd.run("y = 2").ok
            with pytest.raises(SnapshotFailed):
                cmd.snapshot(owner="k", secret=SECRET)
    finally:
        small.close()


def test_forks_are_independent_and_reseeded(default_sandbox: Sandbox) -> None:
    with default_sandbox.session() as s:
        assert s.run("import random\nrandom.seed(5)\nitems = [1]\nopen('/scratch/f', 'w').write('0')").ok
        a, b = s.fork(2)
        (same,) = s.fork(1, keep_seeds=True)
        try:
            assert a.run("items.append('a'); open('/scratch/f', 'w').write('a')").ok
            r = b.run("print(items, open('/scratch/f').read())")
            assert r.ok and r.stdout == "[1] 0\n", r.stderr
            draws = [x.run("print(random.random())").stdout for x in (s, same, a, b)]
            assert draws[0] == draws[1]  # keep_seeds: the same continuation
            assert len({draws[0], draws[2], draws[3]}) == 3  # fresh seeds each
            assert s.run("print(items)").stdout == "[1]\n"
        finally:
            for x in (a, b, same):
                x.close()


def test_resumed_and_forked_sessions_keep_no_copy_of_their_state(default_sandbox: Sandbox) -> None:
    """Once in the instance, a saved state (its whole body: memory pages, files) is not kept on
    the host beside it for the session's life, uncounted (issue 39, item 6)."""
    def states() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is State)

    with default_sandbox.session() as s:
        assert s.run("big = bytes(8 << 20)\nopen('/scratch/f', 'wb').write(b'x' * 100_000)").ok
        snap = s.snapshot(owner="k", secret=SECRET)
        copies = s.fork(2)
    resumed = default_sandbox.resume(snap, owner="k", secret=SECRET)
    try:
        assert states() == 0
        for x in (*copies, resumed):
            r = x.run("print(len(big), len(open('/scratch/f', 'rb').read()))")
            assert r.ok and r.stdout == f"{8 << 20} 100000\n", r.stderr
    finally:
        for x in (*copies, resumed):
            x.close()


def test_a_datascience_session_resumes_with_its_dataframe(datascience_sandbox: Sandbox) -> None:
    with datascience_sandbox.session() as s:
        r = s.run("import pandas as pd, numpy as np\ndf = pd.DataFrame({'k': list('abab'), 'v': np.arange(4.0)})")
        assert r.ok, r.stderr
        snap = s.snapshot(owner="k", secret=SECRET)
    with datascience_sandbox.resume(snap, owner="k", secret=SECRET) as later:
        r = later.run("print(df.groupby('k').v.sum().to_dict())")
        assert r.ok and r.stdout == "{'a': 2.0, 'b': 4.0}\n", r.stderr


def test_the_server_secret_comes_from_the_environment(default_sandbox: Sandbox,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WASM_RUNNER_SNAPSHOT_SECRET", "11" * 32)
    with default_sandbox.session() as s:
        assert s.run("z = 3").ok
        snap = s.snapshot(owner="env")
    with pytest.raises(SnapshotRefused) as info:
        default_sandbox.resume(snap, owner="env", secret=SECRET)
    assert info.value.reason == "foreign"
    monkeypatch.setenv("WASM_RUNNER_SNAPSHOT_SECRET", "22" * 32)  # the server's secret rotated
    with pytest.raises(SnapshotRefused):
        default_sandbox.resume(snap, owner="env")
    monkeypatch.setenv("WASM_RUNNER_SNAPSHOT_SECRET", "11" * 32)
    with default_sandbox.resume(snap, owner="env") as s2:
        assert s2.run("print(z)").stdout == "3\n"
