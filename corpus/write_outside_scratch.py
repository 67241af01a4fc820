# category: files
# attack: writes files to /tmp, the home directory and a host folder by absolute path
# expect: harmless
for path in ("@@HOST_TMP_FILE@@", "@@HOST_HOME_FILE@@", "@@CANARY_DIR@@/absolute-was-here", "@@CANARY_FILE@@"):
    try:
        with open(path, "a") as f:
            f.write("written from the sandbox\n")
        print("wrote", path)
    except Exception as exc:
        print(path, "refused:", type(exc).__name__)
