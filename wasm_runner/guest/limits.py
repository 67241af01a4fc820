# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# The recursion limit a program sees, for both tiers. Part of the guest package
# ``_wasm_runner_guest`` (guest/install.py): plain Python, standard library only, run inside the
# guest.
#
# The runner's own frames below the program must not use up its recursion limit: the program
# sees (and sets) the limit as if its module were the outermost frame, as in ``python main.py``.
# ``cap`` bounds the interpreter's real limit where the stack holds fewer frames than a program
# may ask for (the browser's); a RecursionError past it is the stack running out.
import sys


class RecursionLimit:
    """sys.setrecursionlimit / sys.getrecursionlimit as the program sees them (``install``), and
    ``begin`` for each run."""

    def __init__(self, cap=None):
        self.cap = cap
        self.depth = 0  # frames below the program's module frame
        self.requested = 0  # what the program asked for (0: untouched)
        real_set, real_get = sys.setrecursionlimit, sys.getrecursionlimit
        self.real_set, self.real_get = real_set, real_get
        state = self

        def setrecursionlimit(limit):
            try:
                n = limit.__index__()
            except AttributeError:
                return real_set(limit)  # the usual TypeError
            if n < 1:
                return real_set(n)  # the usual ValueError
            real_set(state.real_limit(n))
            state.requested = n

        def getrecursionlimit():
            return state.requested or (real_get() - state.depth)

        setrecursionlimit.__doc__, getrecursionlimit.__doc__ = real_set.__doc__, real_get.__doc__
        self.set, self.get = setrecursionlimit, getrecursionlimit

    def real_limit(self, limit):
        """The interpreter's limit for a program limit of ``limit``."""
        real = limit + self.depth
        return real if self.cap is None else min(real, self.cap)

    def install(self):
        sys.setrecursionlimit, sys.getrecursionlimit = self.set, self.get

    def begin(self, depth, limit):
        """A program starts ``depth`` frames deep (the caller counts them) with ``limit``."""
        self.depth = depth
        self.requested = limit
        self.real_set(self.real_limit(limit))

    def out_of_stack(self, exc):
        """Whether ``exc`` is a RecursionError only because the cap is below what the program
        asked for."""
        return (isinstance(exc, RecursionError) and self.cap is not None
                and self.requested + self.depth > self.cap)


def frames_below(frame):
    """How many frames ``frame`` and those below it are."""
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth
