// Python installed once per worker, after Pyodide loads: the run helper, input(), an
// interruptible time.sleep, and plot capture. Kept as a string so the worker loads no extra file.
export const BOOTSTRAP_PY = String.raw`
import ast, base64, builtins, inspect, io, os, sys, time, traceback
import _wasm_runner_host as _host

os.environ.setdefault("MPLBACKEND", "agg")

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
    _host.flush()
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
    deadline = time.monotonic() + float(seconds)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        _host.wait(min(left, 0.25) * 1000.0)

builtins.input = _input
sys.stdin = _Stdin()
if _host.shared():
    time.sleep = _sleep

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

def _emit_figures():
    for data in _figures():
        _host.emit_output("image", "image/png", data)

def _patch_show():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and not getattr(plt.show, "_wasm_runner", False):
        def show(*args, **kwargs):
            _emit_figures()
        show._wasm_runner = True
        plt.show = show

def _user_traceback(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<main>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))

def _outcome_of(exc):
    """(outcome, exit_code) for an exception that ended the program."""
    try:
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None:
                return "ok", 0
            if isinstance(code, int):
                code = code if 0 <= code <= 255 else 1
                return ("ok" if code == 0 else "error"), code
            sys.stderr.write(str(code) + "\n")
            return "error", 1
        if isinstance(exc, KeyboardInterrupt):
            return "interrupted", None
        sys.stderr.write(_user_traceback(exc))
        return "error", 1
    except KeyboardInterrupt:
        return "interrupted", None

def _finish(outcome, exit_code):
    _host.interrupts(False)  # a Stop can no longer land once the program has ended
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        _patch_show()
        _emit_figures()
    except KeyboardInterrupt:
        pass
    except BaseException as exc:
        sys.stderr.write("could not capture figures: %s\n" % exc)
    try:
        for _ in range(200):  # a Stop already on its way lands here, not in the next run
            pass
    except KeyboardInterrupt:
        pass
    return outcome, exit_code

def _compile(code):
    return compile(code, "<main>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

def _run(code):
    """Run one program in fresh globals; (outcome, exit_code), or None if it needs _run_async."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        _patch_show()
        compiled = _compile(code)
        if compiled.co_flags & inspect.CO_COROUTINE:
            return None
        eval(compiled, namespace)
        result = ("ok", 0)
    except BaseException as exc:
        result = _outcome_of(exc)
    return _finish(*result)

async def _run_async(code):
    """_run for programs using top-level await."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        await eval(_compile(code), namespace)
        result = ("ok", 0)
    except BaseException as exc:
        result = _outcome_of(exc)
    return _finish(*result)
`;
