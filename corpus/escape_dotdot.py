# category: files
# attack: climbs out of its working directory with ../ to read and write host files
# expect: harmless
up = "../" * 30
target = up + "@@CANARY_FILE@@".lstrip("/")
try:
    with open(target) as f:
        print("read:", f.read())
except Exception as exc:
    print("read refused:", type(exc).__name__)
try:
    with open(up + "@@CANARY_DIR@@".lstrip("/") + "/dotdot-was-here", "w") as f:
        f.write("x")
    print("wrote outside")
except Exception as exc:
    print("write refused:", type(exc).__name__)
