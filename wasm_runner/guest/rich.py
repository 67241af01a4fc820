# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# Rich output as notebooks have it, for both tiers: Jupyter MIME bundles made from the ``_repr_*_``
# protocol, without IPython. ``display(obj)`` (a builtin, as in IPython) and the value of a run's or
# a cell's last expression each become one bundle: ``{"data": {mime: data}, "metadata": {...}}``,
# ``text/plain`` always, the other types as the object offers them (pandas: HTML; sympy: LaTeX;
# a matplotlib figure: PNG; the user's own classes: whatever ``_repr_*_`` they define). Part of
# the guest package ``_wasm_runner_guest`` (guest/install.py): plain Python, standard library only,
# run inside the guest.
#
# A bundle leaves through the tier's ``emit(kind, mime, data)`` as ONE output: kind "display"
# (display()) or "result" (the last expression), mime BUNDLE_MIME, data the bundle as JSON text.
# The host checks it (wasm_runner/notebook/bundles.py) and turns it into nbformat's outputs.
import sys

BUNDLE_MIME = "application/vnd.wasm-runner.bundle+json"
# the types a bundle may hold, each with the method that makes it (IPython's formatters' order)
REPRS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
)
TEXT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml")
BINARY_TYPES = ("image/png", "image/jpeg")
MAX_BUNDLE_CHARS = 8 << 20  # one bundle's data, at most (the host bounds a run's outputs too)
MAX_RUN_CHARS = 12 << 20  # all bundles of one run (or cell): the job's report stays within the host's bound
MAX_JSON_VALUES = 20_000  # values of one application/json, at most (the report's JSON is bounded too)
MAX_PLAIN_CHARS = 100_000  # text/plain of a repr, at most
MAX_TYPES = 32  # mime types in one bundle, at most
_left = [MAX_RUN_CHARS]  # what this run may still send (install() starts a run's count)


def _method(value, name):
    """The bound ``_repr_*_`` method ``name`` of ``value``, looked up on its type (as IPython does:
    a class itself, or an object answering every attribute, offers none), or None."""
    if isinstance(value, type):
        return None
    try:
        if getattr(type(value), name, None) is None:
            return None
        method = getattr(value, name)
    except Exception:
        return None
    return method if callable(method) else None


def _plain(value):
    """The repr, cut at MAX_PLAIN_CHARS; a repr that raises is the program's error (as when
    Python itself shows the value)."""
    text = repr(value)
    if len(text) > MAX_PLAIN_CHARS:
        text = text[:MAX_PLAIN_CHARS] + "..."
    return text


def _encode(mime, data):
    """``data`` as a bundle holds it (text; base64 for binary images; an object for JSON), or
    None when it is not of a usable type."""
    if data is None:
        return None
    if mime in BINARY_TYPES:
        import base64
        if isinstance(data, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(data)).decode("ascii")
        if isinstance(data, str):  # already base64, as IPython accepts it
            return data.strip()
        return None
    if mime == "application/json" or mime.endswith("+json"):
        if isinstance(data, (str, bytes)):
            import json
            try:
                return json.loads(data)
            except ValueError:
                return None
        return data if isinstance(data, (dict, list)) and _few_values(data) else None
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).decode("utf-8", "replace")
    if isinstance(data, str):
        return data
    return None


def _few_values(data):
    """Whether JSON ``data`` holds at most MAX_JSON_VALUES values."""
    stack, count = [data], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_JSON_VALUES:
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def _figure_png(value):
    """A matplotlib Figure as PNG bytes (it has no ``_repr_png_``; IPython's inline backend draws
    it), or None for anything else."""
    mpl_figure = sys.modules.get("matplotlib.figure")
    if mpl_figure is None or not isinstance(value, getattr(mpl_figure, "Figure", ())):
        return None
    import io
    buffer = io.BytesIO()
    value.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def bundle(value, include=None, exclude=None):
    """(data, metadata): the MIME bundle of ``value``. ``_repr_mimebundle_`` first, then each
    ``_repr_*_`` method of REPRS; a method that raises or returns None adds nothing (as in
    IPython); ``text/plain`` is the repr. ``include``/``exclude``: mime types to keep or drop."""
    data, metadata = {}, {}

    def add(mime, raw, meta=None):
        if not isinstance(mime, str) or mime in data or len(data) >= MAX_TYPES:
            return
        encoded = _encode(mime, raw)
        if encoded is None:
            return
        data[mime] = encoded
        if isinstance(meta, dict) and meta:
            metadata[mime] = meta

    method = _method(value, "_repr_mimebundle_")
    if method is not None:
        try:
            try:
                made = method(include=include, exclude=exclude)
            except TypeError:
                made = method()
            meta = None
            if isinstance(made, tuple) and len(made) == 2:
                made, meta = made
            if isinstance(made, dict):
                for mime, raw in made.items():
                    add(mime, raw, meta.get(mime) if isinstance(meta, dict) else None)
        except Exception:
            pass
    for mime, name in REPRS:
        if mime in data:
            continue
        method = _method(value, name)
        if method is None:
            continue
        try:
            made = method()
        except Exception:
            continue
        meta = None
        if isinstance(made, tuple) and len(made) == 2:
            made, meta = made
        add(mime, made, meta)
    if "image/png" not in data:
        try:
            add("image/png", _figure_png(value))
        except Exception:
            pass
    if "text/plain" not in data:
        data["text/plain"] = _plain(value)
    if include:
        data = {k: v for k, v in data.items() if k in include or k == "text/plain"}
    if exclude:
        data = {k: v for k, v in data.items() if k not in exclude or k == "text/plain"}
    return data, {k: v for k, v in metadata.items() if k in data}


def _bounded(data, metadata):
    """The bundle as JSON text, within MAX_BUNDLE_CHARS and what the run has left of
    MAX_RUN_CHARS; over it, its text/plain begins a note that says so; None once the run's
    bound is reached."""
    import json

    def dumps(bundle):  # as the host writes a bundle again (notebook/bundles.py): the same text
        return json.dumps(bundle, default=str, ensure_ascii=False, separators=(",", ":"))

    text = dumps({"data": data, "metadata": metadata})
    bound = min(MAX_BUNDLE_CHARS, _left[0])
    if len(text) > bound:
        if _left[0] < 4096:  # the run's bound is reached: nothing more, not even a note
            return None
        plain = str(data.get("text/plain", ""))[:1000]
        note = "[output too large to show: %d characters; the limit is %d]" % (len(text), bound)
        text = dumps({"data": {"text/plain": plain + "\n" + note}, "metadata": {}})
    _left[0] = max(0, _left[0] - len(text))
    return text


def emit_bundle(emit, kind, data, metadata):
    text = _bounded(data, metadata)
    if text is not None:
        emit(kind, BUNDLE_MIME, text)


def show(value, emit):
    """The last expression's value as a "result" bundle, as a notebook cell shows it. None shows
    nothing."""
    if value is None:
        return
    emit_bundle(emit, "result", *bundle(value))


def display_function(emit):
    """The builtin ``display(*objs, raw=False, metadata=None, include=None, exclude=None)`` of
    IPython, for this tier's ``emit``: each object as a "display" bundle (``raw``: the objects are
    bundles already, ``{mime: data}``). Returns None."""

    def display(*objs, raw=False, metadata=None, include=None, exclude=None, **kwargs):
        for obj in objs:
            if raw:
                if not isinstance(obj, dict):
                    raise TypeError("display(raw=True) takes dicts of {mime type: data}")
                data = {}
                for mime, value in obj.items():
                    encoded = _encode(mime, value) if isinstance(mime, str) else None
                    if encoded is not None and len(data) < MAX_TYPES:
                        data[mime] = encoded
                if "text/plain" not in data:
                    data["text/plain"] = ""
                meta = {}
            else:
                data, meta = bundle(obj, include, exclude)
            if isinstance(metadata, dict):
                meta = dict(meta, **{k: v for k, v in metadata.items() if isinstance(k, str)})
            emit_bundle(emit, "display", data, meta)

    display.__qualname__ = "display"
    return display


class IPythonDisplay:
    """``from IPython.display import display, HTML, Markdown, Latex, Math, SVG, JSON, Image``
    where IPython is not installed (a meta-path finder, after every other: an installed IPython
    wins): the objects notebook code builds, each with the ``_repr_*_`` method of its type, and
    the builtin ``display``."""

    NAMES = ("IPython", "IPython.display", "IPython.core", "IPython.core.display")

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in cls.NAMES:
            return None
        from importlib.machinery import ModuleSpec
        return ModuleSpec(name, cls, is_package=name in ("IPython", "IPython.core"))

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        import builtins
        if module.__name__ in ("IPython", "IPython.core"):
            module.__path__ = []
            if module.__name__ == "IPython":
                module.display = lambda *objs, **kwargs: builtins.display(*objs, **kwargs)
                module.get_ipython = lambda: None
            return
        for name, value in _display_objects().items():
            setattr(module, name, value)
        module.display = lambda *objs, **kwargs: builtins.display(*objs, **kwargs)
        module.clear_output = lambda wait=False: None


def _display_objects():
    """The IPython.display classes, made when the program imports them."""

    class DisplayObject:
        binary = False

        def __init__(self, data=None, url=None, filename=None, metadata=None):
            if filename is not None:
                with open(filename, "rb" if self.binary else "r") as f:
                    data = f.read()
            self.data, self.url, self.filename, self.metadata = data, url, filename, metadata

        def __repr__(self):
            return "<IPython.core.display.%s object>" % type(self).__name__

    class HTML(DisplayObject):
        def _repr_html_(self):
            return self.data

    class Markdown(DisplayObject):
        def _repr_markdown_(self):
            return self.data

    class Latex(DisplayObject):
        def _repr_latex_(self):
            return self.data

    class Math(DisplayObject):
        def _repr_latex_(self):
            return "$$%s$$" % str(self.data).strip().strip("$")

    class SVG(DisplayObject):
        def _repr_svg_(self):
            return self.data

    class JSON(DisplayObject):
        def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, **kwargs):
            DisplayObject.__init__(self, data, url, filename, metadata)
            if isinstance(self.data, str):
                import json
                self.data = json.loads(self.data)

        def _repr_json_(self):
            return self.data

    class Pretty(DisplayObject):
        def __repr__(self):
            return str(self.data)

    class Image(DisplayObject):
        binary = True

        def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None,
                     height=None, metadata=None, **kwargs):
            if isinstance(data, str) and filename is None and not data.startswith("iVBOR"):
                filename, data = data, None  # Image("plot.png"): a file's name
            DisplayObject.__init__(self, data, url, filename, metadata)
            name = (filename or "").lower()
            if format is None:
                jpeg = name.endswith((".jpg", ".jpeg")) or (isinstance(self.data, bytes) and self.data[:2] == b"\xff\xd8")
                format = "jpeg" if jpeg else "png"
            self.format = "jpeg" if str(format).lower() in ("jpg", "jpeg") else "png"
            self.size = {k: v for k, v in (("width", width), ("height", height)) if v is not None}

        def _made(self, want):
            if self.format != want or self.data is None:
                return None
            return (self.data, self.size) if self.size else self.data

        def _repr_png_(self):
            return self._made("png")

        def _repr_jpeg_(self):
            return self._made("jpeg")

    return {"DisplayObject": DisplayObject, "HTML": HTML, "Markdown": Markdown, "Latex": Latex,
            "Math": Math, "SVG": SVG, "JSON": JSON, "Pretty": Pretty, "Image": Image}


def install(emit):
    """``display`` as a builtin, as IPython has it (the one name the runners put where a program
    sees it that is not ``_wr_``: it is the notebook's own), at the start of each run or cell:
    its bundles count against MAX_RUN_CHARS from here; and ``IPython.display`` where IPython is
    not installed."""
    import builtins
    _left[0] = MAX_RUN_CHARS
    builtins.display = display_function(emit)
    if IPythonDisplay not in sys.meta_path:
        sys.meta_path.append(IPythonDisplay)
