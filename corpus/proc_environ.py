# category: secrets
# attack: reads the environment of itself, its parent and pid 1 through /proc
# expect: harmless
import os
pids = ["self", "1"]
try:
    pids.append(str(os.getppid()))
except Exception:
    pass
for pid in pids:
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                print(pid, what, f.read()[:4000].replace(b"\0", b" ").decode("utf-8", "replace"))
        except Exception as exc:
            print(pid, what, "refused:", type(exc).__name__)
