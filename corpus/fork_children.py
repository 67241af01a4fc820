# category: processes
# attack: forks 100 children that sleep, then exits (bounded: a real fork bomb would hurt a shared host)
# expect: harmless
import os
import time
made = 0
for _ in range(100):
    try:
        pid = os.fork()
    except (OSError, AttributeError) as exc:
        print("fork refused:", type(exc).__name__)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    made += 1
print("forked", made)
