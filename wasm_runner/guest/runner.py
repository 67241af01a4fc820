# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# The guest-side wrapper. It runs inside the sandbox (compiled once by the guest itself and loaded
# with marshal, see sandbox/wrapper.py, after the guest package ``_wasm_runner_guest`` it uses:
# guest/install.py, output.py, tracebacks.py, limits.py, figures.py, shared with the browser
# tier; program.py holds what both tiers do around a program: reseeding, argv, the last
# expression; rich.py the MIME bundles of display() and of the last expression's value), and is
# trusted by nobody: the host decides every status from what it saw itself. It
# reads jobs from the host's control channel on fd 0 (length-prefixed JSON frames), runs each,
# and reports on fd 0.
#
# One job: compile the user's code (a syntax error is reported like CPython does), run it in a
# fresh __main__ namespace, print an uncaught exception's traceback trimmed to the user's frames,
# run atexit handlers, clear the program's globals and collect garbage (so unclosed files are
# flushed), flush stdout/stderr, report, then end with os._exit(code): a fresh run skips CPython's
# slow interpreter shutdown. The exit code follows CPython on Linux: sys.exit(2**100) gives 255.
#
# A session's cells share one namespace and keep the instance; their jobs say "rest": after each
# report the wrapper returns from the host's ``turn`` (the instance rests, and can be saved as a
# snapshot, sandbox/session_state.py) and the next ``turn`` of ``_wr_main()`` goes on where it left.
#
# Output (guest/output.py): stdout and stderr share one ordered pending buffer, written line by
# line while the program prints slowly and in blocks once it prints fast; the host sets the pace
# flag every 50 ms of the guest's CPU time (or 200 ms of wall time). Should the run be stopped by
# force, the host reads what is still pending from the guest's memory.
def _wr_main():
    step = getattr(_wr_main, "step", None)
    if step is not None:  # a resting session: its next cell
        return step()
    import sys, os, json, gc, io, time

    from _wasm_runner_guest import output, tracebacks, limits, figures, program, rich, explain

    # ---- output: one pending buffer for stdout and stderr, in the order written ------------
    _write, _exit = os.write, os._exit
    out = output.ordered(_write)
    out_flush = out.flush
    pending, tick = out.pending, out.tick  # the host reads and sets these in the guest's memory

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
        sys.stdout, sys.stderr = output.streams(out, sys.stdout, sys.stderr)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        old = sys.stdin
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(_Source()), encoding=old.encoding,
                                                     errors=old.errors, newline="\n")
        time.sleep = output.flushing(out, time.sleep)
        os._exit = output.flushing(out, _exit)
        os.write = output.flushing_write(out, _write)

    # ---- figures: plt.show() puts them in the job's outputs ---------------------------------
    job_outputs = [[]]
    job_start = [0, 0, 0]  # out.sent when the job began: an output's "at" counts from there

    def emitter(outputs):
        def emit(kind, mime, data):
            flush()  # what was printed before it goes out first: its place among the streams
            sent = out.sent
            outputs.append({"kind": kind, "mime": mime, "data": data,
                            "at": {"stdout": sent[1] - job_start[1], "stderr": sent[2] - job_start[2]}})
        return emit

    figures.ShowBackend.on_show = lambda: program.show_figures(emitter(job_outputs[0]), figures.capture)
    sys.meta_path.append(figures.ShowBackend)

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

    # ---- tracebacks (guest/tracebacks.py) ---------------------------------------------------
    print_exception, exit_code_of = tracebacks.print_exception, tracebacks.exit_code_of

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

    # the program sees (and sets) the recursion limit as in ``python main.py`` (guest/limits.py)
    recursion = limits.RecursionLimit()
    recursion.install()

    job_explanation = [None]  # what went wrong, for a beginner (guest/explain.py)

    def explained(e, filename, code):
        try:
            job_explanation[0] = explain.explain(e, filename, code)
        except BaseException:
            pass

    def run_job(job, ns):
        flush()
        job_start[:] = out.sent
        outputs = job_outputs[0] = []
        job_explanation[0] = None
        # this frame and those below it (exec adds none); a session keeps the limit it set
        recursion.begin(limits.frames_below(sys._getframe()), recursion.get())
        code = job["code"]
        filename = job.get("filename") or "<string>"
        display = job.get("display")
        emit = emitter(outputs)
        rich.install(emit)  # display(obj): a MIME bundle in this job's outputs (guest/rich.py)
        status = 0
        memory_error = False
        program.prepare(filename, code)  # sys.argv and the source for tracebacks
        try:  # "figures": plots only, no echo of the last value
            body, tail = program.compile_program(code, filename, program.echoes(display))
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
            print_exception(e, 99)
            flush()
            explained(e, filename, code)
            return 1, outputs, isinstance(e, MemoryError)
        try:
            exec(body, ns)
            if tail is not None:
                rich.show(eval(tail, ns), emit)
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
            if not memory_error:
                explained(e, filename, code)
        try:  # open figures (as `display` says), the turtle's drawing (always)
            program.at_end(display, emit, figures.capture, figures.turtle_svg)
            flush()
        except BaseException:
            pass
        return status, outputs, memory_error

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
    gc.freeze()  # the interpreter's own objects: never scanned by the collections below
    # made now: when memory runs out, reporting that must not need any
    out_of_memory = b'{"exit": 1, "outputs": [], "memory_error": true}'

    # The job loop is a generator: a session that rests between cells (the host's job says
    # "rest") returns from the host's ``turn`` at each ``yield`` with the loop's state kept in
    # memory; the next ``turn`` of ``_wr_main()`` goes on from there (``_wr_main.step``).
    def loop():
        session_ns = None
        code = 0
        seeded = False
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
                if job.get("kind") == "rest":  # a session's first rest, before its first cell
                    yield
                    continue
                if job.get("kind") == "warm":
                    gc.collect()
                    gc.freeze()  # what the warm-up imported is not the program's: skip it when collecting
                    os.write(0, b'{"warm": true}')  # back to the control channel for the real job
                    continue
                if not seeded or job.get("reseed"):  # a fork's copy: seeds of its own
                    seeded = True
                    program.reseed()  # an image or a warm slot seeded them before the run
                os.chdir(job.get("cwd", "/scratch"))
                if job.get("session"):
                    if session_ns is None:
                        session_ns = {"__name__": "__main__", "__builtins__": __builtins__}
                    ns = session_ns
                else:
                    ns = main_mod.__dict__
                    program.clear(ns, keep)
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
                report = {"exit": code, "outputs": outputs, "memory_error": memory_error}
                if job_explanation[0] is not None:
                    report["explanation"] = job_explanation[0]
                    job_explanation[0] = None
                try:
                    report = json.dumps(report)
                except Exception:  # a parameter JSON cannot carry: the explanation goes
                    report.pop("explanation", None)
                    report = json.dumps(report)
                if job.get("once"):
                    # the report goes first: should freeing what the program left (a structure nested
                    # a million deep) exhaust the stack, how the program ended is known already
                    os.write(0, report.encode())
                    program.clear(ns, keep)
                    gc.collect()  # unclosed files are flushed
                    flush()
                    break
                if not job.get("session"):
                    program.clear(ns, keep)
                    gc.collect()
                    flush()
                os.write(0, report.encode())
                if job.get("rest"):  # back to the host until the next cell (the instance rests)
                    yield
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


    steps = loop()
    _wr_main.step = lambda: next(steps, None)
    next(steps, None)

_wr_main()
