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
#
# Output: sys.stdout and sys.stderr share one pending buffer that keeps the order in which the
# two were written (a switch of stream writes out what is pending). While the program prints
# slowly each line goes out at once (line buffering); once it prints fast (128 writes within
# 50 ms of its CPU time) output goes to the host in blocks: at 16 KiB, at the first write after
# the host's pace flag (set every 50 ms of the guest's CPU time, or 200 ms of wall time), on an
# explicit flush(), before the program reads stdin or sleeps, and when the job ends. A print
# loop so costs a host call per block instead of one per line, and no clock reads. Should the
# run be stopped by force, the host reads what is still pending from the guest's memory.
def _wr_main():
    import sys, os, json, gc, io, time

    # ---- output: one pending buffer for stdout and stderr, in the order written ------------
    _write, _monotonic, _sleep, _exit = os.write, time.monotonic, time.sleep, os._exit
    BLOCK, BURST, WINDOW = 16384, 128, 0.05
    CLOCK_EVERY = 2048  # writes between clock reads (a host call) when the host sets no pace flag
    # pending[0] is the fd (1 or 2) the rest belongs to; the host may read it from the guest's
    # memory when it stops a run by force (``outbuf`` below), so nothing pending is lost
    pending = bytearray(b"\x01WRPB")
    HEAD = len(pending)
    direct, writes, t0, tflush = True, 0, 0.0, 0.0  # pace: line by line, or blocks
    # the pace flag: the host sets tick[0] every 50 ms while the guest runs (no clock call needed)
    tick = bytearray(b"\x00WRTK")
    paced = [False]  # whether the host ever set it
    errors = {1: "surrogateescape", 2: "backslashreplace"}

    def out_flush():
        """Write everything pending to the host, in order."""
        if len(pending) > HEAD:
            fd = pending[0]
            view = memoryview(pending)[HEAD:]
            try:
                while view:
                    try:
                        k = _write(fd, view)
                    except OSError:
                        break
                    if k <= 0:
                        break
                    view = view[k:]
            finally:
                view.release()
            del pending[HEAD:]

    def switch(fd):
        out_flush()
        pending[0] = fd

    def pace():
        """The host set the pace flag: what is pending goes out. Flag 1 says WINDOW of this
        guest's CPU time passed: fewer than BURST writes in it is a slow pace, written line by
        line again (flag 2 only says output is due: the host is loaded, the count means little)."""
        nonlocal direct, writes
        if tick[0] == 1:
            direct, writes = writes < BURST, 0
        tick[0] = 0
        paced[0] = True
        out_flush()

    def window():
        """Without a pace flag from the host: every CLOCK_EVERY writes, the clock decides."""
        nonlocal direct, writes, t0, tflush
        now = _monotonic()
        direct = now - t0 >= WINDOW * CLOCK_EVERY / BURST
        t0, writes = now, 0
        if direct or now - tflush >= WINDOW:
            tflush = now
            out_flush()

    def after_write(size):
        nonlocal writes, direct
        writes += 1
        if direct:
            out_flush()
            if writes >= BURST and paced[0]:  # BURST writes within WINDOW: blocks
                direct = False
        elif len(pending) >= BLOCK:
            out_flush()
        if writes >= CLOCK_EVERY and not paced[0]:
            window()

    def make_text_write(fd):
        err = errors[fd]

        def write(s):
            nonlocal writes, pending, direct
            try:
                data = s.encode()
            except AttributeError:
                raise TypeError("write() argument must be str, not %s" % type(s).__name__) from None
            except UnicodeEncodeError:
                data = s.encode("utf-8", err)  # as sys.stdout would, or its error
            if pending[0] != fd:
                switch(fd)
            if tick[0]:  # what waited since the host's last flag goes out first
                pace()
            pending += data  # in place: the buffer the host knows stays the same object
            writes += 1
            if direct:
                if "\n" in s:  # line-buffered while the pace is slow
                    out_flush()
                if writes >= BURST:  # BURST writes within WINDOW: blocks from now on
                    if paced[0]:
                        direct = False
                    elif writes >= CLOCK_EVERY:
                        window()
            elif len(pending) >= BLOCK:
                out_flush()
            elif writes >= CLOCK_EVERY and not paced[0]:
                window()
            return len(s)
        return write

    def make_bytes_write(fd):
        def write(b):
            data = bytes(b)
            if pending[0] != fd:
                switch(fd)
            if tick[0]:
                pace()
            pending.extend(data)
            after_write(len(data))
            return len(data)
        return write

    class _Sink(io.RawIOBase):
        """sys.stdout.buffer / sys.stderr.buffer: bytes into the pending buffer."""

        def __init__(self, fd):
            self._fd = fd
            self.write = make_bytes_write(fd)

        def writable(self):
            return True

        def fileno(self):
            return self._fd

        def isatty(self):
            return False

        def flush(self):
            out_flush()

        def close(self):  # what was written still goes out
            out_flush()

    class _Text(io.TextIOBase):
        """sys.stdout / sys.stderr: text into the pending buffer (pure Python: a print costs no
        trip through C and back, and no host call while output is held in blocks)."""

        def __init__(self, fd, name, old):
            self._fd = fd
            self.name = name
            self.buffer = _Sink(fd)
            self.write = make_text_write(fd)
            self._encoding = getattr(old, "encoding", "utf-8") or "utf-8"
            self._errors = getattr(old, "errors", "strict") or "strict"

        encoding = property(lambda self: self._encoding)
        errors = property(lambda self: self._errors)
        newlines = None
        line_buffering = False
        write_through = False
        mode = "w"

        def writable(self):
            return True

        def fileno(self):
            return self._fd

        def isatty(self):
            return False

        def flush(self):
            out_flush()

        def close(self):  # like a closed pipe for the program, but what it wrote goes out
            out_flush()

        def writelines(self, lines):
            for line in lines:
                self.write(line)

        def reconfigure(self, *, encoding=None, errors=None, newline=None, line_buffering=None,
                        write_through=None):
            out_flush()
            if encoding is not None:
                "".encode(encoding)  # LookupError for an unknown codec, as CPython gives
                self._encoding = encoding
            if errors is not None:
                self._errors = errors

    class _Source(io.RawIOBase):
        """The binary layer under sys.stdin: pending output goes out before a read waits."""

        def readable(self):
            return True

        def fileno(self):
            return 0

        def isatty(self):
            return False

        def readinto(self, b):
            out_flush()
            data = os.read(0, len(b))
            b[: len(data)] = data
            return len(data)

    def install_streams():
        errors[1] = sys.stdout.errors or "surrogateescape"
        errors[2] = sys.stderr.errors or "backslashreplace"
        for name, fd in (("stdout", 1), ("stderr", 2)):
            s = _Text(fd, "<%s>" % name, getattr(sys, name))
            setattr(sys, name, s)
            setattr(sys, "__%s__" % name, s)
        old = sys.stdin
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(_Source()), encoding=old.encoding,
                                                     errors=old.errors, newline="\n")

        def sleep(secs):
            out_flush()
            return _sleep(secs)

        def _exit_flushed(code):
            out_flush()
            _exit(code)

        def write(fd, data):
            if fd in (1, 2):
                out_flush()
            return _write(fd, data)

        for f, orig in ((sleep, _sleep), (_exit_flushed, _exit), (write, _write)):
            f.__name__, f.__qualname__, f.__doc__ = orig.__name__, orig.__name__, orig.__doc__
        time.sleep, os._exit, os.write = sleep, _exit_flushed, write

    # ---- figures: plt.show() puts them in the job's outputs ---------------------------------
    job_outputs = [[]]

    def figures_to(outputs):
        plt_mod = sys.modules.get("matplotlib.pyplot")
        if plt_mod is None:
            return
        try:
            import base64
            for num in plt_mod.get_fignums():
                fig = plt_mod.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                outputs.append({"kind": "image", "mime": "image/png",
                                "data": base64.b64encode(buf.getvalue()).decode()})
            plt_mod.close("all")
        except Exception as e:
            outputs.append({"kind": "text", "mime": "text/plain", "data": "figure capture failed: %r" % (e,)})

    class _ShowBackend:
        """``MPLBACKEND=module://wasm_runner_show``: Agg drawing, and a show() that puts the
        figures in the outputs (no "non-interactive" warning). Made when matplotlib asks."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "wasm_runner_show":
                return None
            from importlib.machinery import ModuleSpec
            return ModuleSpec(name, _ShowBackend)

        @staticmethod
        def create_module(spec):
            return None

        @staticmethod
        def exec_module(mod):
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            def show(*args, **kwargs):
                figures_to(job_outputs[0])

            mod.FigureCanvas = FigureCanvasAgg
            mod.FigureManager = FigureCanvasAgg.manager_class
            mod.show = show

    sys.meta_path.append(_ShowBackend)

    def find_turtle(name, path=None, target=None):
        """``import turtle``: wasm-runner's window-less turtle (the stdlib's needs tkinter)."""
        if name != "turtle":
            return None
        from importlib.util import spec_from_file_location
        return spec_from_file_location("turtle", "/wasm-runner/turtle.py")

    sys.meta_path.insert(0, type("_TurtleFinder", (), {"find_spec": staticmethod(find_turtle)}))
    if "matplotlib" in sys.modules:  # imported by an image before this wrapper ran: switch it
        try:
            sys.modules["matplotlib"].use("module://wasm_runner_show")
        except Exception:
            pass

    # ---- tracebacks -----------------------------------------------------------------------
    DEEP = 3000  # frames; beyond this a traceback is compacted before CPython prints it
    keep_alive = []  # deep tracebacks of a single run are never freed: os._exit ends it

    def compact(tb):
        """The lengths (minus 3) of the runs of one repeated line that CPython's printer
        collapses, in order. A very deep traceback is relinked so that each such run keeps
        4 frames: printing it then costs what printing a short one does."""
        n, t = 0, tb
        while t is not None and n <= DEEP:
            t = t.tb_next
            n += 1
        deep = n > DEEP
        counts = []
        t = tb
        code, line, run = t.tb_frame.f_code, t.tb_lineno, 0
        fourth = None
        while t is not None:
            c, ln = t.tb_frame.f_code, t.tb_lineno
            if c is code and ln == line:
                run += 1
                if run == 4:
                    fourth = t
            else:
                if run > 4 and deep:
                    keep_alive.append(fourth.tb_next)  # freeing a long chain would recurse
                    fourth.tb_next = t
                if run >= 4:
                    counts.append(run - 3)
                code, line, run = c, ln, 1
            t = t.tb_next
        if run > 4 and deep:
            keep_alive.append(fourth.tb_next)
            fourth.tb_next = None
        if run >= 4:
            counts.append(run - 3)
        return deep, counts

    def without_wrapper(tb):
        """``tb`` without the wrapper's own frames (its stand-ins for time.sleep, os.write,
        sys.setrecursionlimit ... called by the program): C functions show none either."""
        mine = print_exception.__code__.co_filename
        n, t = 0, tb
        while t is not None and n <= DEEP:
            t = t.tb_next
            n += 1
        if n > DEEP:  # far too deep to copy: the program's recursion, not the wrapper
            return tb
        kept = []
        while tb is not None:
            if tb.tb_frame.f_code.co_filename != mine:
                kept.append(tb)
            tb = tb.tb_next
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        if kept:
            kept[-1].tb_next = None
        return kept[0] if kept else None

    def print_exception(exc, skip):
        tb = exc.__traceback__
        for _ in range(skip):
            if tb is not None:
                tb = tb.tb_next
        exc.__traceback__ = tb = without_wrapper(tb)
        e = exc.__cause__ if exc.__cause__ is not None else exc.__context__
        for _ in range(20):
            if e is None:
                break
            e.__traceback__ = without_wrapper(e.__traceback__)
            e = e.__cause__ if e.__cause__ is not None else e.__context__
        chain, e = [], exc
        while e is not None and len(chain) < 20 and e not in chain:
            chain.append(e)
            e = e.__cause__ if e.__cause__ is not None else (None if e.__suppress_context__ else e.__context__)
        fixes, any_deep = [], False
        for e in reversed(chain):  # printed oldest first
            if e.__traceback__ is not None:
                deep, counts = compact(e.__traceback__)
                fixes.extend(counts)
                if deep:
                    any_deep = True
                    keep_alive.append(e)
        missing = [e for e in chain if isinstance(e, ModuleNotFoundError)]
        if not any_deep and not missing:
            sys.__excepthook__(type(exc), exc, tb)  # CPython's own printer
            return
        import traceback, re
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        it = iter(fixes)

        def fix(m):
            k = next(it, None)
            if k is None:
                return m.group(0)
            return "[Previous line repeated %d more time%s]" % (k, "s" if k > 1 else "")

        if any_deep:
            text = re.sub(r"\[Previous line repeated 1 more time\]", fix, text)
        if missing:
            text = readable_import_errors(text, missing)
        sys.stderr.write(text)

    def readable_import_errors(text, errors):
        """A failed import said as a student reads it: without CPython's hint about the
        interpreter's start-up flags (site initialization is off in the sandbox, on purpose),
        with the module of this runtime the name is closest to, if any ("maths": "math")."""
        import re
        text = re.sub(r"\. Site initialization is disabled, did you forget to [^\n]*\?", "", text)
        for e in errors:
            name = getattr(e, "name", None)
            if not isinstance(name, str) or not name.isidentifier():
                continue
            line = "ModuleNotFoundError: No module named %r\n" % name
            if line not in text:
                continue
            close = close_module(name)
            if close:
                text = text.replace(line, line[:-1] + ". Did you mean: %r?\n" % close, 1)
        return text

    def close_module(name):
        """The importable top-level module whose name is closest to ``name`` (the standard
        library's and this runtime's packages), or None."""
        try:
            import difflib, pkgutil
            names = {m for m in sys.stdlib_module_names if not m.startswith("_")}
            names.update(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
            names.discard(name)
            found = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
            return found[0] if found else None
        except Exception:
            return None

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

    def flush():
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass
        out_flush()

    said = [False]

    def last_words(name):
        """The exception's name on stderr, when printing more failed (memory is exhausted)."""
        said[0] = True
        try:
            out_flush()
        except BaseException:
            pass
        try:
            _write(2, ("%s\n" % name).encode())
        except BaseException:
            pass

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

    # The wrapper's own frames must not use up the program's recursion limit: the program sees
    # (and sets) the limit as if its module were the outermost frame, as in ``python main.py``.
    _setrl, _getrl = sys.setrecursionlimit, sys.getrecursionlimit
    rl_offset = [0]

    def setrecursionlimit(limit):
        _setrl(limit)  # CPython's own checks and errors first
        _setrl(limit + rl_offset[0])

    def getrecursionlimit():
        return _getrl() - rl_offset[0]

    setrecursionlimit.__doc__, getrecursionlimit.__doc__ = _setrl.__doc__, _getrl.__doc__
    sys.setrecursionlimit, sys.getrecursionlimit = setrecursionlimit, getrecursionlimit

    def run_job(job, ns):
        outputs = job_outputs[0] = []
        f, depth = sys._getframe(), 0
        while f is not None:  # this frame and those below it; exec adds none
            depth += 1
            f = f.f_back
        user_limit = getrecursionlimit()
        rl_offset[0] = depth
        _setrl(user_limit + depth)
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
            if job.get("display") is True:  # "figures": plots only, no echo of the last value
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
            except BaseException as again:  # out of memory while printing: the name at least
                memory_error = memory_error or isinstance(again, MemoryError)
                last_words(type(e).__name__)
            status = 1
        try:
            if job.get("display"):
                figures_to(outputs)
            take_svg = getattr(sys.modules.get("turtle"), "_wr_take_svg", None)
            svg = take_svg() if take_svg is not None else None
            if svg:  # a turtle drawing is the program's output: shown whatever `display` says
                outputs.append({"kind": "image", "mime": "image/svg+xml", "data": svg})
            flush()
        except BaseException:
            pass
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
    os.environ.update({"HOME": "/scratch", "LANG": "C.UTF-8", "MPLBACKEND": "module://wasm_runner_show",
                       "MPLCONFIGDIR": "/tmp"})
    install_streams()
    try:  # where pending output lives: the host writes it out should the run end by force
        _write(0, json.dumps({"outbuf": id(pending), "tick": id(tick)}).encode())
    except OSError:
        pass
    main_mod = sys.modules["__main__"]
    keep = set(main_mod.__dict__) - {"_wr_main"}
    session_ns = None
    code = 0
    seeded = False
    gc.freeze()  # the interpreter's own objects: never scanned by the collections below
    # made now: when memory runs out, reporting that must not need any
    out_of_memory = b'{"exit": 1, "outputs": [], "memory_error": true}'
    try:
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
            try:
                code, outputs, memory_error = run_job(job, ns)
            except BaseException as e:  # the wrapper itself failed (memory exhausted): still report
                code, outputs, memory_error = 1, [], isinstance(e, MemoryError)
                last_words(type(e).__name__)
            if not job.get("session"):
                try:
                    import atexit
                    atexit._run_exitfuncs()
                except BaseException:
                    pass
                flush()
            report = json.dumps({"exit": code, "outputs": outputs, "memory_error": memory_error})
            if job.get("once"):
                # the report goes first: should freeing what the program left (a structure nested
                # a million deep) exhaust the stack, how the program ended is known already
                os.write(0, report.encode())
                for k in list(ns):
                    if k not in keep:
                        del ns[k]
                gc.collect()  # unclosed files are flushed
                flush()
                break
            if not job.get("session"):
                for k in list(ns):
                    if k not in keep:
                        del ns[k]
                gc.collect()
                flush()
            os.write(0, report.encode())
        flush()
        os._exit(code)

    except BaseException as e:  # memory exhausted even for the wrapper: report, end here
        # no Python-level call here (a call needs memory for its frame); what is still pending
        # in the output buffer the host reads from memory (``outbuf``)
        try:
            if isinstance(e, MemoryError):
                if not said[0]:
                    _write(2, b"MemoryError\n")
                _write(0, out_of_memory)
            else:
                _write(0, b'{"exit": 1, "outputs": []}')
        finally:
            _exit(1)

_wr_main()
