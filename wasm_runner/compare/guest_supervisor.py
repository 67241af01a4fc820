"""Runs inside the microVM as its init's child: one program under rlimits, as nobody, in /scratch.

Standard library only. Prints one framed JSON line to the console, which the host reads:
``@@WR-RESULT@@{...}``. The host classifies the ending with the same code as the other tiers.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

__all__ = ["main"]

NOBODY = 65534


def main(program: str, limits_path: str) -> None:
    with open(limits_path) as f:
        lim = json.load(f)
    cpu = max(1, round(lim["cpu_seconds"]))
    shutil.copy(program, "/scratch/main.py")
    os.chown("/scratch", NOBODY, NOBODY)
    os.chown("/scratch/main.py", NOBODY, NOBODY)

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["disk_bytes"], lim["disk_bytes"]))
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["/usr/bin/python3.11", "-I", "main.py"], cwd="/scratch", env={"PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=preexec,  # noqa: PLW1509 user=NOBODY, group=NOBODY, extra_groups=[],
    )
    killed: list[str] = []

    def kill(why: str) -> None:
        if not killed:
            killed.append(why)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    caps = {"stdout": lim["stdout_bytes"], "stderr": lim["stderr_bytes"]}
    data = {"stdout": bytearray(), "stderr": bytearray()}

    def read(stream, key: str) -> None:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                return
            room = caps[key] - len(data[key])
            data[key] += chunk[: max(room, 0)]
            if len(chunk) > room:
                kill("output_limit")

    threads = [threading.Thread(target=read, args=(proc.stdout, "stdout"), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, "stderr"), daemon=True)]
    for t in threads:
        t.start()
    timer = threading.Timer(lim["wall_seconds"], kill, args=("timeout",))
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall_ms = (time.monotonic() - t0) * 1000
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for t in threads:
        t.join(timeout=2)
    result = {
        "returncode": os.waitstatus_to_exitcode(status),
        "killed_for": killed[0] if killed else None,
        "cpu_used": usage.ru_utime + usage.ru_stime,
        "wall_ms": wall_ms,
        "stdout": data["stdout"].decode("utf-8", "replace"),
        "stderr": data["stderr"].decode("utf-8", "replace"),
    }
    sys.stdout.write("\n@@WR-RESULT@@" + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except BaseException as exc:  # noqa: BLE001 - report, then let init power off
        sys.stdout.write("\n@@WR-RESULT@@" + json.dumps({"supervisor_error": repr(exc)}) + "\n")
        sys.stdout.flush()
