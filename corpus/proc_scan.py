# category: secrets
# attack: walks /proc for every process's environment, hunting for secrets
# expect: harmless
import os
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except Exception as exc:
    pids = []
    print("no /proc:", type(exc).__name__)
print("processes visible:", len(pids))
for pid in pids:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
        if b"@@SECRET_NAME@@" in env:
            print(pid, env.replace(b"\0", b" ").decode("utf-8", "replace")[:4000])
    except Exception:
        pass
