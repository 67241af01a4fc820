// Python installed once per interpreter, as the module `_wasm_runner`: the run helper, input(),
// an interruptible time.sleep, and plot capture. Kept as a string so the worker loads no extra
// file. It runs before a memory snapshot is made (see worker-core.js), so nothing at its top
// level may depend on the browser it will run in: ask `_host` at run time instead.
import { FLUSH_SECONDS } from "./tiers.js";

export const BOOTSTRAP_PY = String.raw`
import ast, base64, builtins, inspect, io, linecache, os, sys, time, traceback
import _wasm_runner_host as _host

os.environ.setdefault("MPLBACKEND", "agg")
_RUNNER_FILE = "<wasm-runner>"
_monotonic = time.monotonic
_FLUSH_SECONDS = ${FLUSH_SECONDS}

class _Output:
    """stdout and stderr as ONE ordered stream, batched before it crosses into JavaScript: a
    batch goes out when it reaches 16 KB, when _FLUSH_SECONDS passed since the last one (so the
    first line after a quiet spell shows at once), on flush(), before input(), in sleep() and at
    the end. _FLUSH_SECONDS is the server's window too (wasm_runner/tiers.py)."""
    def __init__(self):
        self.parts = []
        self.size = 0
        self.last = 0.0
    def add(self, stream, text):
        parts = self.parts
        if parts and parts[-1][0] == stream:
            parts[-1][1].append(text)
        else:
            parts.append((stream, [text]))
        self.size += len(text)
        now = _monotonic()
        if self.size >= 16384 or now - self.last >= _FLUSH_SECONDS:
            self.flush(now)
    def flush(self, now=None):
        parts = self.parts
        if parts:
            self.parts = []
            self.size = 0
            for stream, texts in parts:
                _host.write(stream, "".join(texts))
        self.last = _monotonic() if now is None else now

_out = _Output()

class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr: text goes into the ordered stream; .buffer reaches the raw file."""
    def __init__(self, name, fd, raw):
        self._stream = name
        self._fd = fd
        self._raw = raw
    @property
    def name(self):
        return "<%s>" % self._stream
    @property
    def encoding(self):
        return "utf-8"
    @property
    def errors(self):
        return "strict"
    @property
    def line_buffering(self):
        return False
    @property
    def buffer(self):
        _out.flush()
        return self._raw.buffer
    def writable(self):
        return True
    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if s:
            _out.add(self._stream, s)
        return len(s)
    def flush(self):
        _out.flush()
    def isatty(self):
        return False
    def fileno(self):
        return self._fd

_stdout = _Stream("stdout", 1, sys.stdout)
_stderr = _Stream("stderr", 2, sys.stderr)
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

def _plain_sleep(seconds):
    _out.flush()
    return _original_sleep(seconds)

builtins.input = _input
_stdin = _Stdin()

# What every run starts from: a program that replaces builtins, streams, the recursion limit or
# time.sleep changes nothing for the next one.
_BUILTINS = dict(builtins.__dict__)
_RECURSION_LIMIT = sys.getrecursionlimit()
_CWD = os.getcwd()
_MODULES = set(sys.modules)

_real_setrecursionlimit = sys.setrecursionlimit
_real_getrecursionlimit = sys.getrecursionlimit
_depth = 0  # frames below the program's module frame (the run helper's)

_STACK_CAP = 3000  # deepest recursion the browser's stack holds safely (Chromium worker: ~4000)
_requested = 0  # the limit the program asked for (0: untouched)

def _setrecursionlimit(limit):
    """sys.setrecursionlimit as in "python main.py": the helper's frames do not count."""
    try:
        limit = limit.__index__()
    except AttributeError:
        return _real_setrecursionlimit(limit)  # the usual TypeError
    if limit < 1:
        return _real_setrecursionlimit(limit)  # the usual ValueError
    global _requested
    _requested = limit
    _real_setrecursionlimit(min(limit + _depth, _STACK_CAP))

def _getrecursionlimit():
    return _requested or (_real_getrecursionlimit() - _depth)

def _out_of_stack(exc):
    """A RecursionError only because the stack cap is below what the program asked for."""
    return isinstance(exc, RecursionError) and _requested + _depth > _STACK_CAP

def _reset(filename, code):
    global _depth, _requested
    _requested = 0
    frame, _depth = sys._getframe(1), 0
    while frame is not None:
        _depth += 1
        frame = frame.f_back
    sys.setrecursionlimit = _setrecursionlimit
    sys.getrecursionlimit = _getrecursionlimit
    _out.parts = []
    _out.size = 0
    _out.last = 0.0
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
    _real_setrecursionlimit(_RECURSION_LIMIT + _depth)
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

def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    images = []
    for number in list(plt.get_fignums()):
        buffer = io.BytesIO()
        plt.figure(number).savefig(buffer, format="png")
        images.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    plt.close("all")
    return images

def _emit_turtle():
    """A turtle drawing (wasm-runner's turtle, written to /wasm-runner by the worker) as SVG."""
    take = getattr(sys.modules.get("turtle"), "_wr_take_svg", None)
    svg = take() if take is not None else None
    if svg:
        _host.emit_output("image", "image/svg+xml", svg)

def _emit_figures():
    _out.flush()
    for data in _figures():
        _host.emit_output("image", "image/png", data)

def _patch_show():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and not getattr(plt.show, "_wasm_runner", False):
        def show(*args, **kwargs):
            _emit_figures()
        show._wasm_runner = True
        plt.show = show

def _without_runner_frames(tb):
    """The traceback with this file's frames (the run helper, input(), sleep()) left out."""
    frames = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != _RUNNER_FILE:
            frames.append(tb)
        tb = tb.tb_next
    for here, after in zip(frames, frames[1:] + [None]):
        here.tb_next = after
    return frames[0] if frames else None

def _user_traceback(exc):
    seen = set()
    def strip(e):
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            e.__traceback__ = _without_runner_frames(e.__traceback__)
            strip(e.__context__)
            e = e.__cause__
    strip(exc)
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

def _outcome_of(exc):
    """(outcome, exit_code) for an exception that ended the program (exit codes as CPython on Linux)."""
    try:
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None:
                return "ok", 0
            if isinstance(code, bool):
                code = int(code)
            if isinstance(code, int):
                if not -(1 << 63) <= code < (1 << 63):
                    code = -1
                code &= 0xFF
                return ("ok" if code == 0 else "error"), code
            sys.stderr.write(str(code) + "\n")
            return "error", 1
        if isinstance(exc, KeyboardInterrupt):
            return "interrupted", None
        if _out_of_stack(exc):
            # The browser's stack holds fewer frames than the program allowed: say so, as the
            # server does when its stack runs out (no traceback, no runner frames).
            sys.stderr.write("RecursionError: Python ran out of stack (the recursion went too deep)\n")
            return "stack", 1
        sys.stderr.write(_user_traceback(exc))
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
        _stdout._raw.flush()
        _stderr._raw.flush()
    except BaseException:
        _out.parts = []
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
        _patch_show()
        compiled = _compile(code, filename)
        if compiled.co_flags & inspect.CO_COROUTINE:
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
