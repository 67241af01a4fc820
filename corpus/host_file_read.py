# category: files
# attack: reads a host file by its absolute path
# expect: harmless
for path in ("@@CANARY_FILE@@", "/etc/passwd", "/etc/hostname"):
    try:
        with open(path) as f:
            print(path, f.read()[:200])
    except Exception as exc:
        print(path, "refused:", type(exc).__name__)
