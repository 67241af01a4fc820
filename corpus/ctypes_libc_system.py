# category: ctypes
# attack: calls libc system() through ctypes to run a shell against the host
# expect: harmless
try:
    import ctypes
    libc = ctypes.CDLL(None)
    rc = libc.system(b"cat @@CANARY_FILE@@; echo ctypes > @@CANARY_DIR@@/ctypes-was-here")
    print("system() returned", rc)
except Exception as exc:
    print("ctypes refused:", type(exc).__name__)
