"""Our own WASI preview1 host: every import the guest has is implemented here, none by wasmtime.

Owning every call is what makes the limits exact: output is counted as it is written and ends the
run at its cap, the disk quota is checked before each byte lands, a sleep or a wait for stdin ends
at the deadline, the fd table only ever holds the grants, and ``proc_exit`` keeps the full code.
Nothing of the host is reachable but the grants' folders; sockets are refused.

Host functions never raise into wasmtime: they record why a run must stop on the ``GuestIO`` and
ask the store's epoch callback to end it (see ``engine.py``), then return an errno.

Modules, in reading order: ``abi`` (errno values, flags, guest memory access), ``fdtable``,
``control`` (the wrapper's job channel on fd 0), ``guestio`` (one guest's host state),
``process`` (args, clocks, random, poll), ``fd_calls``, ``path_calls``, ``linker``.
"""

from .control import HostCall
from .guestio import GuestIO, InputSource, StopRun, Stream, current
from .linker import define_imports

__all__ = ["GuestIO", "HostCall", "InputSource", "StopRun", "Stream", "current", "define_imports"]
