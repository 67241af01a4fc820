# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# Running one program, for both tiers: what the server's runner (guest/runner.py) and the
# browser's (guest/browser.py, generated into web/src/bootstrap.py.js) do alike around the
# user's code. Part of the guest package ``_wasm_runner_guest`` (guest/install.py): plain Python,
# standard library only, run inside the guest. Each runner still executes the program itself
# (``exec`` in its own frame): the frames below the program, which the recursion limit counts
# (guest/limits.py), stay the runner's.
#
# ``emit(kind, mime, data)`` is the tier's way to hand a rich output over: an entry in the job's
# report on the server, a message to the page in the browser.
import sys


def reseed():
    """Fresh seeds, at the start of a run, for what seeded itself when it was imported before
    the run (by an image, a warm slot, the browser's memory snapshot, or an earlier run in the
    same interpreter): ``random``, ``numpy.random`` and tempfile's name sequence. The seeds come
    from the tier's randomness (the host's random_get; the browser's crypto.getRandomValues)."""
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


def prepare(filename, code):
    """What the program sees of how it was started, as ``python FILENAME``: ``sys.argv``, and
    its source under its file name, for tracebacks (linecache)."""
    sys.argv = [filename]
    try:
        import linecache
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    except Exception:
        pass


def compile_program(code, filename, echo=False, flags=0):
    """(body, tail): the program compiled under its file name, and (``echo``) its last statement
    split off when it is an expression, compiled to be evaluated for its value (``tail``, else
    None), as a notebook cell's. ``flags``: compile flags (the browser allows top-level await)."""
    if not echo:
        return compile(code, filename, "exec", flags), None
    import ast
    tree = compile(code, filename, "exec", flags | ast.PyCF_ONLY_AST)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", flags)
    return body, (compile(last, filename, "eval", flags) if last is not None else None)


def echoes(display):
    """Whether a run's ``display`` setting shows the last expression's value (only ``True``:
    ``"figures"`` shows the figures alone)."""
    return display is True


def show_figures(emit, capture):
    """The figures still open, as PNG images (``capture``: figures.capture); a failure to draw
    them is said as a text output."""
    try:
        capture(lambda data: emit("image", "image/png", data))
    except Exception as e:
        emit("text", "text/plain", "figure capture failed: %r" % (e,))


def at_end(display, emit, capture, turtle_svg):
    """What a run shows when its program has ended: the figures still open (when ``display``
    asks for figures: ``True`` or ``"figures"``), then the turtle's drawing (always: it is the
    program's output)."""
    if display:
        show_figures(emit, capture)
    svg = turtle_svg()
    if svg:
        emit("image", "image/svg+xml", svg)


def clear(namespace, keep):
    """The program's names gone from ``namespace`` (those not in ``keep``): the next program
    starts with fresh globals."""
    for name in list(namespace):
        if name not in keep:
            del namespace[name]
