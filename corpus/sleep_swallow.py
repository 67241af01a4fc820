# category: wall
# attack: sleeps in a loop that swallows every exception and ignores catchable signals
# expect: stopped
# limit: wall
import signal
import time
for name in ("SIGTERM", "SIGINT", "SIGALRM", "SIGHUP"):
    try:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    except (AttributeError, ValueError, OSError):
        pass
while True:
    try:
        time.sleep(3600)
    except BaseException:
        pass
