# The guest-side wrapper. It runs inside the sandbox (compiled once by the guest itself and loaded
# with marshal, see sandbox.py), and is trusted by
# nobody: the host decides every status from what it saw itself. It reads jobs from the host's
# control channel on fd 0 (length-prefixed JSON frames), runs each, and reports on fd 0.
#
# One job: compile the user's code (a syntax error is reported like CPython does), run it in a
# fresh __main__ namespace, print an uncaught exception's traceback trimmed to the user's frames,
# run atexit handlers, clear the program's globals and collect garbage (so unclosed files are
# flushed), flush stdout/stderr, report, then end with os._exit(code): a fresh run skips CPython's
# slow interpreter shutdown. The exit code follows CPython on Linux: sys.exit(2**100) gives 255.
def _wr_main():
    import sys, os, json, gc

    def read_frame():
        buf = b""
        while len(buf) < 8:
            b = os.read(0, 8 - len(buf))
            if not b:
                return None
            buf += b
        if buf[:4] != b"WRJB":
            return None
        n = int.from_bytes(buf[4:], "little")
        data = b""
        while len(data) < n:
            b = os.read(0, n - len(data))
            if not b:
                return None
            data += b
        return json.loads(data)

    def exit_code_of(exc):
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, bool):
            code = int(code)
        if isinstance(code, int):
            if not -(1 << 63) <= code < (1 << 63):
                code = -1  # what CPython does on overflow
            return code & 0xFF
        try:
            sys.stderr.write(str(code) + "\n")
        except Exception:
            pass
        return 1

    def print_exception(exc, skip):
        tb = exc.__traceback__
        for _ in range(skip):
            if tb is not None:
                tb = tb.tb_next
        exc.__traceback__ = tb
        sys.__excepthook__(type(exc), exc, tb)  # CPython's own printer, no imports

    def flush():
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass

    def capture_figures(outputs):
        plt_mod = sys.modules.get("matplotlib.pyplot")
        if plt_mod is None:
            return
        try:
            import io as _iomod, base64
            for num in plt_mod.get_fignums():
                fig = plt_mod.figure(num)
                buf = _iomod.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                outputs.append({"kind": "image", "mime": "image/png",
                                "data": base64.b64encode(buf.getvalue()).decode()})
            plt_mod.close("all")
        except Exception as e:
            outputs.append({"kind": "text", "mime": "text/plain", "data": "figure capture failed: %r" % (e,)})

    def show_value(value, outputs):
        if value is None:
            return
        html = getattr(value, "_repr_html_", None)
        text = repr(value)
        if callable(html):
            try:
                h = html()
                if h:
                    outputs.append({"kind": "table", "mime": "text/html", "data": str(h)})
            except Exception:
                pass
            outputs.append({"kind": "table", "mime": "text/plain", "data": text})
        else:
            outputs.append({"kind": "text", "mime": "text/plain", "data": text})

    def run_job(job, ns):
        outputs = []
        code = job["code"]
        filename = job.get("filename") or "<string>"
        status = 0
        memory_error = False
        try:
            import linecache
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        except Exception:
            pass
        tail = None
        try:
            if job.get("display"):
                import ast
                tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST)
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, "exec")
                tail = compile(last, filename, "eval") if last is not None else None
            else:
                body = compile(code, filename, "exec")
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
            print_exception(e, 99)
            flush()
            return 1, outputs, isinstance(e, MemoryError)
        try:
            exec(body, ns)
            if tail is not None:
                value = eval(tail, ns)
                show_value(value, outputs)
        except SystemExit as e:
            status = exit_code_of(e)
        except BaseException as e:
            memory_error = isinstance(e, MemoryError)
            try:
                print_exception(e, 1)
            except BaseException:
                sys.stderr.write("%s\n" % type(e).__name__)
            status = 1
        if job.get("display"):
            capture_figures(outputs)
        flush()
        return status, outputs, memory_error

    def reseed():
        # An image or a warm slot imported these before the run and they seeded themselves
        # then: give every run its own seeds (from the host's random_get), once, at its start.
        r = sys.modules.get("random")
        if r is not None:
            r.seed()
        npr = sys.modules.get("numpy.random")
        if npr is not None:
            try:
                npr.seed()
            except Exception:
                pass
        t = sys.modules.get("tempfile")
        if t is not None:
            t._name_sequence = None

    os.environ.clear()
    os.environ.update({"HOME": "/scratch", "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp"})
    for s in (sys.stdout, sys.stderr):
        try:
            s.reconfigure(line_buffering=True)
        except Exception:
            pass
    main_mod = sys.modules["__main__"]
    keep = set(main_mod.__dict__) - {"_wr_main"}
    session_ns = None
    code = 0
    seeded = False
    gc.freeze()  # the interpreter's own objects: never scanned by the collections below
    while True:
        job = read_frame()
        if job is None:
            break
        for name in job.get("preload", ()):
            try:
                __import__(name)
            except Exception:
                pass
        if job.get("kind") == "warm":
            gc.collect()
            gc.freeze()  # what the warm-up imported is not the program's: skip it when collecting
            os.write(0, b'{"warm": true}')  # back to the control channel for the real job
            continue
        if not seeded:
            seeded = True
            reseed()
        os.chdir(job.get("cwd", "/scratch"))
        if job.get("session"):
            if session_ns is None:
                session_ns = {"__name__": "__main__", "__builtins__": __builtins__}
            ns = session_ns
        else:
            ns = main_mod.__dict__
            for k in list(ns):
                if k not in keep:
                    del ns[k]
        sys.argv = [job.get("filename") or "-c"]
        code, outputs, memory_error = run_job(job, ns)
        if not job.get("session"):
            try:
                import atexit
                atexit._run_exitfuncs()
            except BaseException:
                pass
            for k in list(ns):
                if k not in keep:
                    del ns[k]
            gc.collect()
            flush()
        report = json.dumps({"exit": code, "outputs": outputs, "memory_error": memory_error})
        os.write(0, report.encode())
        if job.get("once"):
            break
    flush()
    os._exit(code)


_wr_main()
