"""Host-side containment probes: what a run did to the host, checked from outside the sandbox.

Before each run the probes lay out bait (a canary directory and file holding a random token, a fake
secret in this process's environment, loopback TCP and UDP listeners, a free port to watch for a
listener the guest might open). After the run, before the tier cleans up, ``finish`` reports every
trace the run left on the host. Nothing here trusts what the guest printed, except as a carrier of
the tokens the guest should never have seen.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..environment import COMPARE_SECRET

__all__ = ["SECRET_NAME", "HostProbes", "ProbeReport"]

SECRET_NAME = COMPARE_SECRET.name
HOST_TMP = tempfile.gettempdir()  # the host's temp folder, before the runner points tiers elsewhere


@dataclass
class ProbeReport:
    """Traces of one run on the host. Every list is empty when the run was contained."""

    canary_read: bool = False
    canary_changed: list[str] = field(default_factory=list)
    secret_leaked: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    host_writes: list[str] = field(default_factory=list)
    lingering_processes: list[str] = field(default_factory=list)
    disk_bytes_used: int = 0  # peak, under the tiers' work folder
    inodes_used: int = 0  # peak entries, same folder
    fs_bytes_drop: int = 0  # peak drop of the whole file system's free space (others write too)
    resources: list[str] = field(default_factory=list)

    def breaches(self) -> list[str]:
        """One short phrase per thing that reached the host."""
        out: list[str] = []
        if self.canary_read:
            out.append("read a host file")
        out += [f"changed host files: {c}" for c in self.canary_changed]
        out += [f"leaked the secret via {s}" for s in self.secret_leaked]
        out += [f"network: {n}" for n in self.network]
        out += [f"wrote outside: {w}" for w in self.host_writes]
        if self.lingering_processes:
            out.append(f"{len(self.lingering_processes)} process(es) outlived the run")
        out += self.resources
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "canary_read": self.canary_read,
            "canary_changed": self.canary_changed,
            "secret_leaked": self.secret_leaked,
            "network": self.network,
            "host_writes": self.host_writes,
            "lingering_processes": self.lingering_processes,
            "disk_bytes_used": self.disk_bytes_used,
            "inodes_used": self.inodes_used,
            "fs_bytes_drop": self.fs_bytes_drop,
            "resources": self.resources,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeReport:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


class _Listener:
    """A loopback socket that records whatever arrives, on a thread of its own."""

    def __init__(self, kind: int) -> None:
        self.sock = socket.socket(socket.AF_INET, kind)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.seen: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._receive()
            except (TimeoutError, OSError):
                continue
            self.seen.append(data)

    def _receive(self) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class _TcpListener(_Listener):
    def __init__(self) -> None:
        super().__init__(socket.SOCK_STREAM)
        self.sock.listen(16)
        self._thread.start()

    def _receive(self) -> bytes:
        conn, _ = self.sock.accept()
        conn.settimeout(0.5)
        data = b""
        try:
            while len(data) < 4096:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        finally:
            conn.close()
        return data


class _UdpListener(_Listener):
    def __init__(self) -> None:
        super().__init__(socket.SOCK_DGRAM)
        self._thread.start()

    def _receive(self) -> bytes:
        data, _ = self.sock.recvfrom(4096)
        return data


class _ListenWatcher:
    """Keeps trying to connect to a port the guest was told to listen on."""

    def __init__(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.reached = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set() and not self.reached:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"probe\n")
                    self.reached = True
            except OSError:
                time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def _tree_usage(root: str) -> tuple[int, int]:
    """Bytes allocated and entries under ``root``; never follows symlinks."""
    total = count = 0
    stack = [root]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                count += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total, count


class _DiskSampler:
    """Samples the disk space and entries used under the tiers' work folder; keeps the peak.

    Measuring the folder rather than the whole file system keeps other processes on a shared host
    out of the figure; the file-system-wide change is recorded too, as information only.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.bytes0, self.count0 = _tree_usage(path)
        self.peak_bytes, self.peak_count = self.bytes0, self.count0
        st = os.statvfs(path)
        self.fs_free0 = self.fs_min_free = st.f_bavail * st.f_frsize
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        used, count = _tree_usage(self.path)
        self.peak_bytes = max(self.peak_bytes, used)
        self.peak_count = max(self.peak_count, count)
        st = os.statvfs(self.path)
        self.fs_min_free = min(self.fs_min_free, st.f_bavail * st.f_frsize)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def close(self) -> tuple[int, int, int]:
        """Peak bytes and entries added during the run, and the file system's peak drop."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()
        return self.peak_bytes - self.bytes0, self.peak_count - self.count0, self.fs_free0 - self.fs_min_free


def _children_of(pid: int, zombies: list[int] | None = None) -> list[int]:
    """Live children of ``pid``; dead ones (zombies) go to ``zombies`` when given."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) != pid:
            continue
        if fields[0] == "Z":
            if zombies is not None:
                zombies.append(int(entry))
            continue
        out.append(int(entry))
    return out


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = "?"
    return f"pid {pid}: {cmd[:80]}"


class HostProbes:
    """Bait and checks for one run. Use ``start()`` before the run and ``finish()`` after it.

    Disk use is sampled during the run (peak, not final, since tiers delete their scratch) under
    ``work_dir``, the folder the runner gives the tiers for their host-side files.
    """

    def __init__(self, work_dir: str | None = None) -> None:
        self.token = "CANARY-" + secrets.token_hex(12)
        self.secret = "SECRET-" + secrets.token_hex(12)
        self.mark = "wasm-runner-escape-" + secrets.token_hex(6)
        self.canary_dir = Path(tempfile.mkdtemp(prefix="wasm-runner-canary-", dir=HOST_TMP))
        self.canary_dir.chmod(0o755)
        self.canary_file = self.canary_dir / "host-secret.txt"
        self.canary_file.write_text(f"{self.token}\n")
        self.canary_file.chmod(0o644)
        self.host_write_targets = [Path(HOST_TMP) / self.mark, Path.home() / f".{self.mark}"]
        self.disk_path = work_dir or HOST_TMP
        self._tcp: _TcpListener | None = None
        self._udp: _UdpListener | None = None
        self._listen: _ListenWatcher | None = None
        self._before: dict[str, Any] = {}
        self._disk: _DiskSampler | None = None
        self._old_secret: str | None = None

    def placeholders(self) -> dict[str, str]:
        """The values a corpus program may name: where the bait is, never the secret's value."""
        assert self._tcp and self._udp and self._listen, "start() first"
        return {
            "CANARY_DIR": str(self.canary_dir),
            "CANARY_FILE": str(self.canary_file),
            "TCP_PORT": str(self._tcp.port),
            "UDP_PORT": str(self._udp.port),
            "LISTEN_PORT": str(self._listen.port),
            "SECRET_NAME": SECRET_NAME,
            "MARK": self.mark,
            "HOST_TMP_FILE": str(self.host_write_targets[0]),
            "HOST_HOME_FILE": str(self.host_write_targets[1]),
        }

    def start(self) -> None:
        self._old_secret = COMPARE_SECRET.raw()
        os.environ[SECRET_NAME] = self.secret
        self._tcp = _TcpListener()
        self._udp = _UdpListener()
        self._listen = _ListenWatcher()
        self._disk = _DiskSampler(self.disk_path)
        self._before = {
            "children": set(_children_of(os.getpid())),
            "listing": sorted(os.listdir(self.canary_dir)),
            "stat": self.canary_file.stat(),
        }

    def finish(self, stdout: str, stderr: str, *, disk_slack: int, inode_slack: int) -> ProbeReport:
        """Collect every trace; kill and report processes that outlived the run."""
        assert self._tcp and self._udp and self._listen and self._disk
        rep = ProbeReport()
        time.sleep(0.05)  # let in-flight datagrams land
        disk, inodes, fs_drop = self._disk.close()
        rep.disk_bytes_used, rep.inodes_used = max(0, disk), max(0, inodes)
        rep.fs_bytes_drop = max(0, fs_drop)
        if rep.disk_bytes_used > disk_slack:
            rep.resources.append(f"used {rep.disk_bytes_used >> 20} MiB of host disk")
        if rep.inodes_used > inode_slack:
            rep.resources.append(f"created {rep.inodes_used} host files")
        zombies: list[int] = []
        known = self._before["children"]
        lingering = [p for p in _children_of(os.getpid(), zombies) if p not in known]
        for pid in zombies:  # orphans adopted by this subreaper and already dead: reap them
            if pid not in known:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        for pid in lingering:
            rep.lingering_processes.append(_describe(pid))
        self._kill_tree(lingering)
        self._listen.close()
        self._tcp.close()
        self._udp.close()
        carried = {"stdout": stdout, "stderr": stderr}
        for i, data in enumerate(self._tcp.seen):
            rep.network.append(f"TCP connection to the host listener ({len(data)} bytes)" if data
                               else "TCP connection to the host listener (no data)")
            carried[f"tcp#{i}"] = data.decode("utf-8", "replace")
        for i, data in enumerate(self._udp.seen):
            rep.network.append(f"UDP datagram to the host listener ({len(data)} bytes)")
            carried[f"udp#{i}"] = data.decode("utf-8", "replace")
        if self._listen.reached:
            rep.network.append("the host reached a port the guest listened on")
        # canary directory and file
        listing = sorted(os.listdir(self.canary_dir))
        new = [n for n in listing if n not in self._before["listing"]]
        gone = [n for n in self._before["listing"] if n not in listing]
        if new:
            rep.canary_changed.append("new " + ", ".join(new))
            for n in new:
                p = self.canary_dir / n
                if p.is_file() and not p.is_symlink():
                    carried[f"file {n}"] = p.read_bytes()[:65536].decode("utf-8", "replace")
        if gone:
            rep.canary_changed.append("removed " + ", ".join(gone))
        if self.canary_file.exists() and not self.canary_file.is_symlink():
            now = self.canary_file.stat()
            if now.st_mtime_ns != self._before["stat"].st_mtime_ns or self.canary_file.read_text() != f"{self.token}\n":
                rep.canary_changed.append("modified the canary file")
            if now.st_mode != self._before["stat"].st_mode:
                rep.canary_changed.append("changed the canary file's mode")
        for target in self.host_write_targets:
            if target.exists() or target.is_symlink():
                rep.host_writes.append(str(target))
                if target.is_file() and not target.is_symlink():
                    carried[str(target)] = target.read_bytes()[:65536].decode("utf-8", "replace")
        rep.canary_read = any(self.token in text for text in carried.values())
        rep.secret_leaked = [where for where, text in carried.items() if self.secret in text]
        return rep

    @staticmethod
    def _kill_tree(pids: list[int]) -> None:
        for pid in pids:
            for child in _children_of(pid):
                HostProbes._kill_tree([child])
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def close(self) -> None:
        """Remove the bait; restore the environment."""
        for target in self.host_write_targets:
            try:
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    target.unlink()
            except OSError:
                pass
        shutil.rmtree(self.canary_dir, ignore_errors=True)
        if self._old_secret is None:
            os.environ.pop(SECRET_NAME, None)
        else:
            os.environ[SECRET_NAME] = self._old_secret
