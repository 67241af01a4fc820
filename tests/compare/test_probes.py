"""Host probes: a clean run leaves no trace; each real trace left on the host is caught."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from wasm_runner.compare.probes import SECRET_NAME, HostProbes
from wasm_runner.compare.process import become_subreaper

SLACK = {"disk_slack": 64 << 20, "inode_slack": 2000}
# Each test gives the probes a folder of its own to measure disk use under, as the runner gives them
# the tiers' work folder: without one they sample the host's whole temp folder every 50 ms, which
# on a developer's or CI machine holds checkouts and virtualenvs (seconds a sample, nothing learnt).


def test_a_run_that_touches_nothing_leaves_a_clean_report(tmp_path):
    probes = HostProbes(str(tmp_path))
    probes.start()
    try:
        report = probes.finish("hello\n", "", **SLACK)
    finally:
        probes.close()
    assert report.breaches() == []


def test_the_secret_is_in_the_environment_only_during_the_run(tmp_path):
    before = os.environ.get(SECRET_NAME)
    probes = HostProbes(str(tmp_path))
    probes.start()
    assert os.environ[SECRET_NAME] == probes.secret
    probes.finish("", "", **SLACK)
    probes.close()
    assert os.environ.get(SECRET_NAME) == before


def test_each_kind_of_trace_is_caught_from_outside(tmp_path):
    probes = HostProbes(str(tmp_path))
    probes.start()
    values = probes.placeholders()
    try:
        # an attacker acting on the host: read the canary, leak the secret, write, phone home
        token = Path(values["CANARY_FILE"]).read_text()
        with open(os.path.join(values["CANARY_DIR"], "pwned"), "w") as f:
            f.write(os.environ[SECRET_NAME])
        with open(values["HOST_TMP_FILE"], "w") as f:
            f.write("x")
        with socket.create_connection(("127.0.0.1", int(values["TCP_PORT"]))) as s:
            s.sendall(b"exfil")
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.sendto(b"dgram", ("127.0.0.1", int(values["UDP_PORT"])))
        udp.close()
        report = probes.finish(token, "", **SLACK)
    finally:
        probes.close()
    assert report.canary_read
    assert report.canary_changed == ["new pwned"]
    assert report.secret_leaked == ["file pwned"]
    assert values["HOST_TMP_FILE"] in report.host_writes
    assert any("TCP" in n for n in report.network) and any("UDP" in n for n in report.network)
    assert not os.path.exists(values["HOST_TMP_FILE"]), "close() removes the bait"


def test_a_listener_opened_during_the_run_is_reached(tmp_path):
    probes = HostProbes(str(tmp_path))
    probes.start()
    values = probes.placeholders()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(values["LISTEN_PORT"])))
    server.listen(1)
    server.settimeout(5)
    try:
        conn, _ = server.accept()
        conn.close()
        report = probes.finish("", "", **SLACK)
    finally:
        server.close()
        probes.close()
    assert "the host reached a port the guest listened on" in report.network


def test_a_daemon_that_outlives_its_run_is_found_and_killed(tmp_path):
    assert become_subreaper()
    probes = HostProbes(str(tmp_path))
    probes.start()
    try:
        # a double-forked daemon: its parent exits at once, it is adopted by this subreaper
        subprocess.run([sys.executable, "-c",
                        "import os,time\nif os.fork()==0:\n    os.setsid(); time.sleep(60)\n"], check=True)
        report = probes.finish("", "", **SLACK)
    finally:
        probes.close()
    assert len(report.lingering_processes) == 1
    pid = int(report.lingering_processes[0].split()[1].rstrip(":"))
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z"


def test_host_disk_used_during_the_run_is_measured_even_if_freed_after(tmp_path):
    probes = HostProbes(str(tmp_path))
    probes.start()
    try:
        big = tmp_path / "fill.bin"
        with open(big, "wb") as f:
            f.write(os.urandom(1 << 20) * 96)
            f.flush()
            os.fsync(f.fileno())
        import time
        time.sleep(0.2)
        big.unlink()
        report = probes.finish("", "", disk_slack=32 << 20, inode_slack=2000)
    finally:
        probes.close()
    assert report.disk_bytes_used >= 64 << 20
    assert any("host disk" in r for r in report.resources)
