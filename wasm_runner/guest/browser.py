# The browser tier's run helper, installed once per interpreter as the module ``_wasm_runner``
# (web/src/worker-core.js runs it as ``<wasm-runner>``, after the guest package
# ``_wasm_runner_guest`` from pylib.js). Generated into web/src/bootstrap.py.js by
# ``python -m wasm_runner.exercises.webgen``; edit this file, not that one.
#
# What both tiers do around a program is the guest package's, shared with the server's runner
# (guest/runner.py): reseeding, sys.argv and the source for tracebacks, compiling the program and
# its last expression, what a run shows at its end (program.py); MIME bundles of display() and
# the last expression (rich.py); output batching (output.py),
# tracebacks and exit codes (tracebacks.py), figures and the turtle (figures.py), the recursion
# limit (limits.py). What is here is the browser's own: streams and input() through JavaScript
# (``_wasm_runner_host``, the worker's object), a time.sleep a Stop interrupts, calls of the page's
# functions, one interpreter reset between runs (the server starts each run in a fresh instance),
# top-level await, and the stack cap.
#
# It runs before a memory snapshot is made (see worker-core.js), so nothing at its top level may
# depend on the browser it will run in: ask ``_host`` at run time instead.
import ast, builtins, codecs, inspect, io, os, sys, time
import _wasm_runner_host as _host
from _wasm_runner_guest import figures as _figures, limits as _limits, output as _output, program as _program
from _wasm_runner_guest import rich as _rich
from _wasm_runner_guest import explain as _explain, tracebacks as _tracebacks

os.environ.setdefault("MPLBACKEND", "agg")

_decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)}

def _send(fd, view):
    """Pending output into JavaScript, as text (the worker keeps each stream within its cap)."""
    _host.write("stdout" if fd == 1 else "stderr", _decoders[fd].decode(bytes(view)))
    return len(view)

# stdout and stderr as ONE ordered stream, batched before it crosses into JavaScript
# (_wasm_runner_guest.output: the server's batching; here the clock sets the pace)
_out = _output.ordered(_send)
_raw_stdout, _raw_stderr = sys.stdout, sys.stderr
_stdout, _stderr = _output.streams(_out, sys.stdout, sys.stderr)
os.write = _output.flushing_write(_out, os.write)

class _Stdin(io.TextIOBase):
    """sys.stdin: lines given up front first, then (interactive runs) lines asked of the page."""
    def readable(self):
        return True
    def readline(self, size=-1):
        line = _next_line("")
        return "" if line is None else line
    def read(self, size=-1):
        parts = []
        while True:
            line = self.readline()
            if not line:
                break
            parts.append(line)
        return "".join(parts)
    def isatty(self):
        return False

def _next_line(prompt):
    line = _host.next_stdin_line()
    if line is not None:
        return line
    mode = _host.input_mode()
    _out.flush()  # everything printed so far is on screen before the program waits
    if mode == "shared":
        line = _host.read_line_blocking(prompt)
    elif mode == "jspi":
        from pyodide.ffi import run_sync
        line = run_sync(_host.read_line_async(prompt))
    else:
        return None  # not interactive, or no way to wait in this browser
    if line is None:
        return None
    return line if line.endswith("\n") else line + "\n"

def _input(prompt=""):
    prompt = str(prompt)
    if prompt:
        sys.stdout.write(prompt)
    sys.stdout.flush()
    _out.flush()
    line = _next_line(prompt)
    if line is None:
        if _host.input_mode() == "unavailable":
            raise EOFError("EOF when reading a line (interactive input() needs cross-origin isolation or JSPI in this browser; give stdin up front)")
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line

_original_sleep = time.sleep
_plain_sleep = _output.flushing(_out, time.sleep)

def _sleep(seconds):
    """time.sleep that a Stop interrupts at once (waits on the interrupt slot)."""
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    _out.flush()
    deadline = time.monotonic() + float(seconds)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        _host.wait(min(left, 0.25) * 1000.0)

builtins.input = _input
_stdin = _Stdin()

def _host_transport(request):
    """One call of the page's functions (the request's JSON as bytes) and its answer, over the
    channel input() uses: the worker waits on the frame with Atomics (cross-origin isolated), or
    the program's stack is suspended until the answer arrives (JSPI)."""
    mode = _host.host_mode()
    text = request.decode("utf-8")
    if mode == "shared":
        answer = _host.host_call_blocking(text)
    elif mode == "jspi":
        from pyodide.ffi import run_sync
        answer = run_sync(_host.host_call_async(text))
    else:
        raise RuntimeError("calling the page's functions needs cross-origin isolation or JSPI in this browser")
    if answer is None:
        raise RuntimeError("the page's function did not answer (the run is ending)")
    return answer.encode("utf-8")

def _install_host():
    """The module "host": the page's functions this run may call (runner.expose), none when
    the page gave it none. The guest side is the server tier's (guest/host_module.py)."""
    sys.modules.pop("host", None)
    names = [name for name in str(_host.host_functions()).split(",") if name]
    if names:
        from _wasm_runner_guest import codec, host
        host._wr_setup(codec, names, {}, int(_host.host_call_bytes()), _host_transport)
        sys.modules["host"] = host

def _network_transport(request):
    """One network request (the request's JSON as bytes) made by the runner for this run: the
    worker sends it with the run's grant to ``POST /api/network/fetch`` (a synchronous
    XMLHttpRequest) and returns the answer's JSON."""
    answer = _host.network_fetch(request.decode("ascii"))
    if answer is None:
        raise ConnectionRefusedError("the runner did not answer the network request")
    return answer.encode("utf-8")

def _install_network():
    """The network shim (the server tier's, guest/network.py) for this run: on when the page got
    a grant from the runner, else every request raises the runner's sentence."""
    from _wasm_runner_guest import network
    on, refusal = str(_host.network_state()).split("\n", 1)
    network._wr_setup(on == "on", refusal, _network_transport)

# What every run starts from: a program that replaces builtins, streams, the recursion limit or
# time.sleep changes nothing for the next one.
_BUILTINS = dict(builtins.__dict__)
_RECURSION_LIMIT = sys.getrecursionlimit()
_CWD = os.getcwd()
_MODULES = set(sys.modules)
_MAIN_KEEP = {name for name in sys.modules["__main__"].__dict__ if name.startswith("__")}

# sys.setrecursionlimit as in "python main.py" (the helper's frames do not count), the real limit
# capped at the deepest recursion the browser's stack holds safely (Chromium worker: ~4000)
_STACK_CAP = 3000
_recursion = _limits.RecursionLimit(cap=_STACK_CAP)

def _reset(filename, code):
    _out.discard()
    for decoder in _decoders.values():
        decoder.reset()
    names = builtins.__dict__
    for name in [n for n in names if n not in _BUILTINS]:
        del names[name]
    names.update(_BUILTINS)
    sys.stdout = sys.__stdout__ = _stdout
    sys.stderr = sys.__stderr__ = _stderr
    sys.stdin = sys.__stdin__ = _stdin
    sys.settrace(None)
    sys.setprofile(None)
    sys.excepthook = sys.__excepthook__
    _recursion.install()
    _recursion.begin(_limits.frames_below(sys._getframe(1)), _RECURSION_LIMIT)
    time.sleep = _sleep if _host.shared() else _plain_sleep  # asked per run: a snapshot holds no answer
    try:
        os.chdir(_CWD)
    except OSError:
        pass
    # modules a program made up (types.ModuleType put into sys.modules) go with it; imported
    # packages stay loaded (importing them again would only cost time)
    for name, module in list(sys.modules.items()):
        if name not in _MODULES and getattr(module, "__spec__", None) is None:
            del sys.modules[name]
    _program.clear(sys.modules["__main__"].__dict__, _MAIN_KEEP)
    _program.reseed()  # a run in this interpreter must not go on from the last one's seeds
    _program.prepare(filename, code)  # sys.argv and the source for tracebacks
    _rich.install(_emit)  # display(obj): a MIME bundle in the run's outputs (a program may have replaced it)
    _install_host()
    _install_network()

def _emit(kind, mime, data):
    _out.flush()  # what was printed before the output reaches the worker first: it records where the output came
    _host.emit_output(kind, mime, data)

def _patch_show():
    """plt.show() puts the open figures in the run's outputs (the server: its matplotlib backend,
    figures.ShowBackend)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and not getattr(plt.show, "_wasm_runner", False):
        def show(*args, **kwargs):
            _out.flush()
            _program.show_figures(_emit, _figures.capture)
        show._wasm_runner = True
        plt.show = show

def _outcome_of(exc):
    """(outcome, exit_code) for an exception that ended the program (exit codes as CPython on Linux)."""
    try:
        if isinstance(exc, SystemExit):
            code = _tracebacks.exit_code_of(exc)
            return ("ok" if code == 0 else "error"), code
        if isinstance(exc, KeyboardInterrupt):
            return "interrupted", None
        if _recursion.out_of_stack(exc):
            # The browser's stack holds fewer frames than the program allowed: say so, as the
            # server does when its stack runs out (no traceback, no runner frames).
            sys.stderr.write("RecursionError: Python ran out of stack (the recursion went too deep)\n")
            return "stack", 1
        _tracebacks.print_exception(exc)
        return "error", 1
    except KeyboardInterrupt:
        return "interrupted", None
    except RecursionError:
        sys.stderr.write("%s: %s\n" % (type(exc).__name__, exc))
        return "error", 1

def _finish(outcome, exit_code, display):
    _host.interrupts(False)  # a Stop can no longer land once the program has ended
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        _out.flush()
        _patch_show()
        # open figures (as `display` says), the turtle's drawing (written to /wasm-runner by the worker)
        _program.at_end(display, _emit, _figures.capture, _figures.turtle_svg)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:
        _stderr.write("could not capture figures: %s\n" % exc)
    try:
        _out.flush()
        _raw_stdout.flush()
        _raw_stderr.flush()
    except BaseException:
        _out.discard()
    try:
        for _ in range(200):  # a Stop already on its way lands here, not in the next run
            pass
    except KeyboardInterrupt:
        pass
    return outcome, exit_code

def _compile(code, filename, display):
    """(body, tail) as the server compiles them (program.compile_program), top-level await
    allowed: Pyodide runs an event loop (the server's runner does not)."""
    return _program.compile_program(code, filename, _program.echoes(display), ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

def _awaits(compiled):
    return compiled is not None and bool(compiled.co_flags & inspect.CO_COROUTINE)

_explanation = [None]  # the last run's, for the worker (_explanation_json)

def _explained(result, exc, filename, code):
    """``result``, with what went wrong said for a beginner kept for the worker (guest/explain.py)."""
    if result[0] in ("error", "stack") and not isinstance(exc, SystemExit):
        try:
            _explanation[0] = _explain.explain(exc, filename, code)
        except BaseException:
            _explanation[0] = None
    return result

def _explanation_json():
    """The last run's explanation as JSON ("" when it has none)."""
    import json
    value, _explanation[0] = _explanation[0], None
    if value is None:
        return ""
    try:
        return json.dumps(value)
    except Exception:
        return ""

def _run(code, filename, display="figures"):
    """Run one program in a clean __main__; (outcome, exit_code), or None if it needs _run_async.
    ``display`` as the server's job has it: True (figures, and the last expression's value),
    "figures" (figures only: the page's default) or False."""
    _reset(filename, code)
    _explanation[0] = None
    namespace = sys.modules["__main__"].__dict__
    try:
        # A Stop can land from here on; one pressed while the run was starting lands now.
        _host.interrupts(True)
        _patch_show()
        body, tail = _compile(code, filename, display)
        if _awaits(body) or _awaits(tail):
            _host.interrupts(False)  # _run_async starts it again, after its own _reset
            return None
        exec(body, namespace)
        if tail is not None:
            _rich.show(eval(tail, namespace), _emit)
        result = ("ok", 0)
    except BaseException as exc:
        result = _explained(_outcome_of(exc), exc, filename, code)
    return _finish(*result, display)

async def _run_async(code, filename, display="figures"):
    """_run for programs using top-level await."""
    _reset(filename, code)
    _explanation[0] = None
    namespace = sys.modules["__main__"].__dict__
    try:
        _host.interrupts(True)
        body, tail = _compile(code, filename, display)
        if _awaits(body):
            await eval(body, namespace)
        else:
            exec(body, namespace)
        if tail is not None:
            value = eval(tail, namespace)
            _rich.show(await value if _awaits(tail) else value, _emit)
        result = ("ok", 0)
    except BaseException as exc:
        result = _explained(_outcome_of(exc), exc, filename, code)
    return _finish(*result, display)

def _python_version():
    return "%d.%d" % sys.version_info[:2]

def _attach():
    """Called once the interpreter is live, after a normal start or after a memory snapshot was
    restored: what a snapshot cannot carry over. Fresh randomness (a module seeded when the
    snapshot was made would repeat its numbers in every browser; every run reseeds too, in
    _reset) and wasm-runner's folder first on sys.path (Pyodide adds '' again when it restores a
    snapshot)."""
    _program.reseed()
    path = [entry for entry in dict.fromkeys(sys.path) if entry != "/wasm-runner"]
    sys.path[:] = ["/wasm-runner"] + path
