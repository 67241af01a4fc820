# category: files
# attack: plants symlinks to host paths in its scratch directory and follows them
# expect: harmless
import os
for name, target in (("file-link", "@@CANARY_FILE@@"), ("dir-link", "@@CANARY_DIR@@"), ("root-link", "/")):
    try:
        os.symlink(target, name)
    except Exception as exc:
        print("symlink refused:", name, type(exc).__name__)
try:
    with open("file-link") as f:
        print("read:", f.read())
except Exception as exc:
    print("read refused:", type(exc).__name__)
try:
    with open("dir-link/symlink-was-here", "w") as f:
        f.write("x")
    print("wrote through link")
except Exception as exc:
    print("write refused:", type(exc).__name__)
try:
    print("root listing:", sorted(os.listdir("root-link"))[:20])
except Exception as exc:
    print("list refused:", type(exc).__name__)
