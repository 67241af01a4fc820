# category: files
# attack: changes the mode of, then deletes, a host file
# expect: harmless
import os
for op in (lambda: os.chmod("@@CANARY_FILE@@", 0o777), lambda: os.remove("@@CANARY_FILE@@")):
    try:
        op()
        print("done")
    except Exception as exc:
        print("refused:", type(exc).__name__)
