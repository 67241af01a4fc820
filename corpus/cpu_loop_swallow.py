# category: cpu
# attack: a busy loop that ignores catchable signals and swallows every exception
# expect: stopped
# limit: cpu
import signal
for name in ("SIGXCPU", "SIGTERM", "SIGINT", "SIGALRM", "SIGHUP", "SIGVTALRM"):
    try:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    except (AttributeError, ValueError, OSError):
        pass
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
