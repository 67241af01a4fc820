# category: processes
# attack: runs a shell that reads and writes host files
# expect: harmless
import subprocess
try:
    r = subprocess.run(
        ["/bin/sh", "-c", "cat @@CANARY_FILE@@; echo shell > @@CANARY_DIR@@/from-shell; ls /"],
        capture_output=True, text=True, timeout=5,
    )
    print(r.stdout, r.stderr)
except Exception as exc:
    print("subprocess refused:", type(exc).__name__, exc)
