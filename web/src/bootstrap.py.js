// Python installed once per interpreter, as the module `_wasm_runner`: the run helper, input(),
// an interruptible time.sleep, and what only Pyodide needs. Output batching, traceback trimming,
// figure capture and the recursion limit are the guest package `_wasm_runner_guest`
// (wasm_runner/guest/, shared with the server's runner; installed just before this from
// pylib.js). Kept as a string so the worker loads no extra file. It runs before a memory
// snapshot is made (see worker-core.js), so nothing at its top level may depend on the browser
// it will run in: ask `_host` at run time instead.
export const BOOTSTRAP_PY = String.raw`
import ast, builtins, codecs, inspect, io, linecache, os, sys, time
import _wasm_runner_host as _host
from _wasm_runner_guest import figures as _figures, limits as _limits, output as _output, tracebacks as _tracebacks

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

# What every run starts from: a program that replaces builtins, streams, the recursion limit or
# time.sleep changes nothing for the next one.
_BUILTINS = dict(builtins.__dict__)
_RECURSION_LIMIT = sys.getrecursionlimit()
_CWD = os.getcwd()
_MODULES = set(sys.modules)

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
    sys.argv = [filename]
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
    main = sys.modules["__main__"]
    for name in list(main.__dict__):
        if not name.startswith("__"):
            del main.__dict__[name]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _install_host()

def _emit_png(data):
    _host.emit_output("image", "image/png", data)

def _emit_turtle():
    """A turtle drawing (wasm-runner's turtle, written to /wasm-runner by the worker) as SVG."""
    svg = _figures.turtle_svg()
    if svg:
        _host.emit_output("image", "image/svg+xml", svg)

def _emit_figures():
    _out.flush()
    _figures.capture(_emit_png)

def _patch_show():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and not getattr(plt.show, "_wasm_runner", False):
        def show(*args, **kwargs):
            _emit_figures()
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

def _finish(outcome, exit_code):
    _host.interrupts(False)  # a Stop can no longer land once the program has ended
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        _out.flush()
        _patch_show()
        _emit_figures()
        _emit_turtle()
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

def _compile(code, filename):
    return compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

def _run(code, filename):
    """Run one program in a clean __main__; (outcome, exit_code), or None if it needs _run_async."""
    _reset(filename, code)
    namespace = sys.modules["__main__"].__dict__
    try:
        # A Stop can land from here on; one pressed while the run was starting lands now.
        _host.interrupts(True)
        _patch_show()
        compiled = _compile(code, filename)
        if compiled.co_flags & inspect.CO_COROUTINE:
            _host.interrupts(False)  # _run_async starts it again, after its own _reset
            return None
        exec(compiled, namespace)
        result = ("ok", 0)
    except BaseException as exc:
        result = _outcome_of(exc)
    return _finish(*result)

async def _run_async(code, filename):
    """_run for programs using top-level await."""
    _reset(filename, code)
    namespace = sys.modules["__main__"].__dict__
    try:
        _host.interrupts(True)
        await eval(_compile(code, filename), namespace)
        result = ("ok", 0)
    except BaseException as exc:
        result = _outcome_of(exc)
    return _finish(*result)

def _python_version():
    return "%d.%d" % sys.version_info[:2]

def _attach():
    """Called once the interpreter is live, after a normal start or after a memory snapshot was
    restored: what a snapshot cannot carry over. Fresh randomness (a module seeded when the
    snapshot was made would repeat its numbers in every browser) and wasm-runner's folder first
    on sys.path (Pyodide adds '' again when it restores a snapshot)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    path = [entry for entry in dict.fromkeys(sys.path) if entry != "/wasm-runner"]
    sys.path[:] = ["/wasm-runner"] + path
`;
