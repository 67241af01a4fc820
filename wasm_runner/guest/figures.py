# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# Figures a program drew, for both tiers: matplotlib's open figures as PNG (at plt.show() and when
# a run ends) and the window-less turtle's drawing as SVG. Part of the guest package
# ``_wasm_runner_guest`` (guest/install.py): plain Python, standard library only, run inside the
# guest; matplotlib is used only when the program imported it.
import io, sys


def capture(emit):
    """Each open matplotlib figure as a base64 PNG, handed to ``emit(data)`` in order; then all
    are closed. Nothing when the program did not import matplotlib.pyplot."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import base64
    for number in list(plt.get_fignums()):
        buffer = io.BytesIO()
        plt.figure(number).savefig(buffer, format="png", bbox_inches="tight")
        emit(base64.b64encode(buffer.getvalue()).decode("ascii"))
    plt.close("all")


def turtle_svg():
    """The turtle drawing (wasm-runner's turtle, guest/lib/turtle.py) as SVG text, or None; the
    turtle starts a clean slate for the next run."""
    take = getattr(sys.modules.get("turtle"), "_wr_take_svg", None)
    return take() if take is not None else None


class ShowBackend:
    """``MPLBACKEND=module://wasm_runner_show``: Agg drawing, and a show() that calls
    ``ShowBackend.on_show()`` (no "non-interactive" warning). A meta-path finder: the backend
    module is made when matplotlib asks for it."""

    on_show = None  # set by the runner

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "wasm_runner_show":
            return None
        from importlib.machinery import ModuleSpec
        return ModuleSpec(name, ShowBackend)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(mod):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        def show(*args, **kwargs):
            if ShowBackend.on_show is not None:
                ShowBackend.on_show()

        mod.FigureCanvas = FigureCanvasAgg
        mod.FigureManager = FigureCanvasAgg.manager_class
        mod.show = show
