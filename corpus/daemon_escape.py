# category: processes
# attack: double-fork and setsid a daemon that later writes to the host and phones home
# expect: harmless
import os
import socket
import time
try:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(0.3)
            for path in ("@@CANARY_DIR@@/daemon-was-here", "@@HOST_TMP_FILE@@"):
                try:
                    with open(path, "w") as f:
                        f.write("daemon")
                except OSError:
                    pass
            try:
                socket.create_connection(("127.0.0.1", @@TCP_PORT@@), timeout=1).sendall(b"daemon")
            except OSError:
                pass
            time.sleep(600)
        os._exit(0)
    print("daemon launched")
except (OSError, AttributeError) as exc:
    print("fork refused:", type(exc).__name__)
time.sleep(1)
