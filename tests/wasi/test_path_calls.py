"""The security boundary, path side: a guest path never reaches outside its grant.

Host calls are driven directly (``tests/support/wasi_host.py``) against real host folders; each test also shows
that the ordinary call next to the refused one still works.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.wasi_host import DATA_FD, SCRATCH_FD, Host

from wasm_runner.wasi.abi import (
    EACCES, EBADF, EEXIST, EFAULT, EINVAL, EISDIR, ELOOP, ENAMETOOLONG, ENOENT, ENOTCAPABLE,
    ENOTDIR, EPERM, EROFS, EXDEV, O_CREAT, O_DIRECTORY, O_EXCL, SUCCESS,
)

EILSEQ = 25


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path / "grants")
    yield h
    h.close()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host folder next to the grants that no call may read or change."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("host secret")
    return d


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "host secret"


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "a/../../outside", "./../x",
                                  "sub/../../../etc/passwd"])
def test_dotdot_never_leaves_the_grant(host: Host, outside: Path, path: str) -> None:
    (host.scratch / "sub").mkdir()
    assert host.open(path)[0] == ENOTCAPABLE
    assert host.open(path, oflags=O_CREAT, write=True)[0] == ENOTCAPABLE
    assert host.path("path_create_directory", path) == ENOTCAPABLE
    assert host.path("path_unlink_file", path) == ENOTCAPABLE
    _untouched(outside)
    assert host.open("sub/../x", oflags=O_CREAT, write=True)[0] == SUCCESS  # inside: fine
    assert (host.scratch / "x").exists()


@pytest.mark.parametrize("path", ["/etc/passwd", "/", "/scratch/x"])
def test_absolute_paths_are_refused(host: Host, path: str) -> None:
    assert host.open(path)[0] == ENOTCAPABLE
    assert host.path("path_create_directory", path) == ENOTCAPABLE


def test_a_symlink_planted_on_the_host_is_never_followed(host: Host, outside: Path) -> None:
    os.symlink(outside, host.scratch / "dirlink")
    os.symlink(outside / "secret.txt", host.scratch / "filelink")
    # the link as the last component: refused, read or write
    assert host.open("filelink")[0] == ELOOP
    assert host.open("filelink", oflags=O_CREAT, write=True)[0] == ELOOP
    assert host.open("dirlink")[0] == ELOOP
    # the link as a folder on the way: refused (O_NOFOLLOW on every component)
    assert host.open("dirlink/secret.txt")[0] in (ELOOP, ENOTDIR)
    assert host.open("dirlink/new.txt", oflags=O_CREAT, write=True)[0] in (ELOOP, ENOTDIR)
    assert host.path("path_create_directory", "dirlink/d") in (ELOOP, ENOTDIR)
    assert host.path("path_unlink_file", "dirlink/secret.txt") in (ELOOP, ENOTDIR)
    p1, n1 = host.put(b"dirlink/secret.txt")
    p2, n2 = host.put(b"stolen.txt")
    assert host.call("path_rename", SCRATCH_FD, p1, n1, SCRATCH_FD, p2, n2) in (ELOOP, ENOTDIR)
    # stat of the link itself describes the link (filetype symlink), not its target
    out = host.alloc(64)
    p, n = host.put(b"filelink")
    assert host.call("path_filestat_get", SCRATCH_FD, 1, p, n, out) == SUCCESS
    assert host.mem.read(out + 16, 1) == bytes([7])  # FT_SYMLINK
    # removing the link removes the link only
    assert host.path("path_unlink_file", "filelink") == SUCCESS
    _untouched(outside)
    assert not (host.scratch / "filelink").exists()


def test_a_symlink_swapped_in_for_a_folder_is_not_followed(host: Host, outside: Path) -> None:
    (host.scratch / "d").mkdir()
    err, dfd = host.open("d", oflags=O_DIRECTORY)
    assert err == SUCCESS
    assert host.open("f.txt", dirfd=dfd, oflags=O_CREAT, write=True)[0] == SUCCESS
    # the host swaps the folder for a link out of the grant: every path is resolved again from
    # the grant's root at call time, so neither the root nor the fd opened before follows it
    os.rename(host.scratch / "d", host.scratch / "d.old")
    os.symlink(outside, host.scratch / "d")
    assert host.open("d/secret.txt")[0] in (ELOOP, ENOTDIR)
    assert host.open("secret.txt", dirfd=dfd)[0] in (ELOOP, ENOTDIR)
    assert host.open("g.txt", dirfd=dfd, oflags=O_CREAT, write=True)[0] in (ELOOP, ENOTDIR)
    _untouched(outside)
    assert sorted(p.name for p in (host.scratch / "d.old").iterdir()) == ["f.txt"]


def test_guests_cannot_make_links(host: Host) -> None:
    (host.scratch / "a").write_text("a")
    p1, n1 = host.put(b"/etc/passwd")
    p2, n2 = host.put(b"link")
    assert host.call("path_symlink", p1, n1, SCRATCH_FD, p2, n2) == EPERM
    p3, n3 = host.put(b"a")
    assert host.call("path_link", SCRATCH_FD, 0, p3, n3, SCRATCH_FD, p2, n2) == EPERM
    assert not os.path.lexists(host.scratch / "link")


def test_read_only_grant_refuses_every_write(host: Host) -> None:
    (host.data / "in.csv").write_text("a,b\n")
    (host.data / "sub").mkdir()
    assert host.open("new.txt", dirfd=DATA_FD, oflags=O_CREAT, write=True)[0] == EROFS
    assert host.open("in.csv", dirfd=DATA_FD, write=True)[0] == EROFS
    assert host.path("path_create_directory", "d", dirfd=DATA_FD) == EROFS
    assert host.path("path_remove_directory", "sub", dirfd=DATA_FD) == EROFS
    assert host.path("path_unlink_file", "in.csv", dirfd=DATA_FD) == EROFS
    assert host.path("path_filestat_set_times", "in.csv", 0, 0, 0, 0, dirfd=DATA_FD) == EROFS
    err, fd = host.open("in.csv", dirfd=DATA_FD)
    assert err == SUCCESS
    assert host.read(fd, 100) == (SUCCESS, b"a,b\n")  # reading is fine
    assert host.write(fd, b"x")[0] == EBADF  # opened read-only
    assert (host.data / "in.csv").read_text() == "a,b\n"
    assert sorted(p.name for p in host.data.iterdir()) == ["in.csv", "sub"]


def test_rename_stays_within_one_grant(host: Host) -> None:
    (host.scratch / "a.txt").write_text("a")
    p1, n1 = host.put(b"a.txt")
    p2, n2 = host.put(b"b.txt")
    assert host.call("path_rename", SCRATCH_FD, p1, n1, DATA_FD, p2, n2) == EXDEV
    p3, n3 = host.put(b"../b.txt")
    assert host.call("path_rename", SCRATCH_FD, p1, n1, SCRATCH_FD, p3, n3) == ENOTCAPABLE
    assert host.call("path_rename", SCRATCH_FD, p1, n1, SCRATCH_FD, p2, n2) == SUCCESS
    assert (host.scratch / "b.txt").read_text() == "a"


def test_the_grant_root_itself_cannot_be_removed_or_renamed(host: Host) -> None:
    assert host.path("path_remove_directory", ".") == EPERM
    assert host.path("path_unlink_file", "") == EPERM
    assert host.scratch.is_dir()


def test_bad_path_bytes_are_errors(host: Host) -> None:
    assert host.open(b"a\x00b")[0] == EINVAL
    assert host.open(b"\xff\xfe")[0] == EILSEQ
    assert host.open(b"x" * 4097)[0] == ENAMETOOLONG
    assert host.open("missing.txt")[0] == ENOENT


def test_special_files_are_never_opened(host: Host) -> None:
    os.mkfifo(host.scratch / "fifo")
    assert host.open("fifo")[0] == EACCES  # would block the host thread


def test_open_flags(host: Host) -> None:
    (host.scratch / "f").write_text("x")
    (host.scratch / "d").mkdir()
    assert host.open("f", oflags=O_CREAT | O_EXCL, write=True)[0] == EEXIST
    assert host.open("f", oflags=O_DIRECTORY)[0] == ENOTDIR
    assert host.open("d", write=True)[0] == EISDIR
    assert host.open("", write=True)[0] == EISDIR  # the grant's root, for writing
    assert host.open("")[0] == SUCCESS


def test_bad_pointers_are_efault_and_leak_no_fd(host: Host) -> None:
    (host.scratch / "f").write_text("x")
    p, n = host.put(b"f")
    before = dict(host.io.fds)
    # the new fd's number cannot be written: the entry and its host fd go again
    assert host.call("path_open", SCRATCH_FD, 0, p, n, 0, 2, 0, 0, 1 << 20) == EFAULT
    assert host.call("path_open", SCRATCH_FD, 0, p, n, 0, 2, 0, 0, -4) == EFAULT
    assert host.io.fds.keys() == before.keys()
    # the path itself is out of bounds
    assert host.call("path_open", SCRATCH_FD, 0, (1 << 16) - 1, 8, 0, 2, 0, 0, 0) == EFAULT
    assert host.call("path_create_directory", SCRATCH_FD, -1, 4) == EFAULT
    assert host.open("f")[0] == SUCCESS
