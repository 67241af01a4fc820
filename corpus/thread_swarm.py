# category: processes
# attack: starts 2000 threads
# expect: harmless
import threading
import time
started = 0
try:
    for _ in range(2000):
        t = threading.Thread(target=time.sleep, args=(0.2,), daemon=True)
        t.start()
        started += 1
except Exception as exc:
    print("threads refused after", started, type(exc).__name__)
print("threads started", started)
