# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# An uncaught exception as a student reads it, for both tiers. Part of the guest package
# ``_wasm_runner_guest`` (guest/install.py): plain Python, standard library only, run inside the
# guest.
#
# The traceback shows the program's frames only: the runner's own (its run helper, its stand-ins
# for time.sleep, os.write, sys.setrecursionlimit, input() ...) are left out, as C functions show
# none. Every module of the runner is compiled with one file name (``<wasm-runner>``), which is
# how its frames are told apart. A very deep traceback (recursion) is compacted before it is
# printed, so printing it costs what printing a short one does. A failed import names the closest
# module there is ("maths": "math").
import sys

DEEP = 3000  # frames; beyond this a traceback is compacted before it is printed
keep_alive = []  # deep tracebacks are never freed: freeing a long chain would recurse
RUNNER_FILE = (lambda: None).__code__.co_filename  # the runner's modules' file name


def compact(tb):
    """The lengths (minus 3) of the runs of one repeated line that CPython's printer collapses,
    in order. A very deep traceback is relinked so that each such run keeps 4 frames."""
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
                keep_alive.append(fourth.tb_next)
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


def without_runner(tb):
    """``tb`` without the runner's own frames."""
    n, t = 0, tb
    while t is not None and n <= DEEP:
        t = t.tb_next
        n += 1
    if n > DEEP:  # far too deep to copy: the program's recursion, not the runner
        return tb
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != RUNNER_FILE:
            kept.append(tb)
        tb = tb.tb_next
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def print_exception(exc, skip=0):
    """Print ``exc`` to sys.stderr as the program's own traceback (its first ``skip`` entries
    dropped as well)."""
    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None:
            tb = tb.tb_next
    exc.__traceback__ = tb = without_runner(tb)
    seen = set()

    def strip(e):  # the chained exceptions (cause and context) too
        while e is not None and id(e) not in seen and len(seen) < 100:
            seen.add(id(e))
            e.__traceback__ = without_runner(e.__traceback__)
            strip(e.__context__)
            e = e.__cause__

    strip(exc.__cause__)
    strip(exc.__context__)
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
        sys.__excepthook__(type(exc), exc, tb)  # CPython's own printer, to sys.stderr
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
    """A failed import said as a student reads it: without CPython's hint about the interpreter's
    start-up flags (site initialization is off in the server's sandbox, on purpose), with the
    module of this runtime the name is closest to, if any ("maths": "math")."""
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
    """The importable top-level module whose name is closest to ``name`` (the standard library's
    and this runtime's packages), or None."""
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
    """The exit status of a SystemExit, as CPython on Linux gives it (sys.exit(2**100): 255; a
    message is printed to stderr and gives 1)."""
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
