"""The program a run hands the guest wrapper: ``host`` (with functions) and the network shim's
finder installed, then the user's code, exactly as the wrapper would run it alone.

The wrapper (``guest/runner.py``) runs one program per job and knows nothing of host functions
or the network. A run hands it a loader instead of the user's code: the first line runs the set-up
(``setup``: the parts the run needs, joined; each costs the guest's slow compiler about 0.1 ms a
line at every run's start): ``_NETWORK`` installs a finder that fetches the network shim
(``guest/network.py``, ``NETWORK_SHIM``) from the host when the program first imports
``socket``, ``http.client`` or ``urllib.request``, and installs it with the run's rule state (on,
or the sentence refusing every request); ``_HOST`` loads codec.py and ``guest/host_module.py``
from source as modules and puts ``host`` in ``sys.modules``; then the user's code is compiled
under its own file name, as the wrapper would (the guest package's ``program`` module,
``guest/program.py``), and run in the job's namespace, the loader's two frames added to the
recursion limit. The second line (only when the last expression's value is shown) evaluates the
user's last expression. Everything of ours is compiled under the wrapper's own file name
(``WRAPPER_FILE``): the wrapper drops those frames from tracebacks, so the user sees the
traceback the same code would give without the loader, and the line numbers of their file.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources import files as _pkg_files

from ..limits import Limits
from .functions import HostFunction, HostFunctions, as_host_functions

__all__ = ["NETWORK_SHIM", "WRAPPER_FILE", "prepare_program", "program"]

WRAPPER_FILE = "<wasm-runner>"  # the file name the wrapper's own code is compiled under


def _source(*parts: str) -> str:
    return _pkg_files("wasm_runner").joinpath(*parts).read_text()


_CODEC_SOURCE = _source("codec.py")
_HOST_SOURCE = _source("guest", "host_module.py")
NETWORK_SHIM = _source("guest", "network.py").encode()  # what the host answers ``net-shim`` with

# runs in the guest, in a namespace of its own; frame 1 is the loader's, in the job's namespace. The
# parts a run needs are joined (``setup``): the guest compiles them at each run's start, and its
# compiler is slow (about 0.1 ms a line), so each part is short.
_BEGIN = """\
import sys
codec_src, host_src, names, docs, max_bytes, net, code, filename, show_last = _wr_args
def load(name, src):
    module = type(sys)(name)
    exec(compile(src, '<wasm-runner>', 'exec'), module.__dict__)
    return module
"""
# the network shim (guest/network.py), fetched from the host and installed when the program first
# imports socket or http.client: most runs never do, and pay only for these lines
_NETWORK = """\
class _wr_later:
    def find_spec(name, path=None, target=None):
        if name not in ('socket', 'http.client', 'urllib.request'):
            return None
        sys.meta_path.remove(_wr_later)
        import os
        os.write(0, b'WRHC{"op":"net-shim"}')
        n, src = int.from_bytes(os.read(0, 4), 'little'), b''
        while len(src) < n:
            src += os.read(0, n - len(src))
        module = sys.modules['_wr_network'] = load('_wr_network', src.decode())
        module._wr_setup(net[0], net[1])
        return module._Finder.find_spec(name, path, target)
_wr_later.find_spec = staticmethod(_wr_later.find_spec)
if '_wr_network' in sys.modules:  # an earlier cell of the session loaded it: this cell's rules
    sys.modules['_wr_network']._wr_setup(net[0], net[1])
elif 'http.client' in sys.modules or '_socket' in sys.modules:
    sys.meta_path.insert(0, _wr_later)
    _wr_later.find_spec('socket')
else:
    sys.meta_path.insert(0, _wr_later)
"""
_HOST = """\
keeper = host = load('host', host_src)
host._wr_setup(load('wasm_runner_codec', codec_src), names, docs, max_bytes)
sys.modules['host'] = host
"""
_KEEPER = """\
keeper = sys.modules['_wr_loader'] = type(sys)('_wr_loader')
def keep(tail, ns):
    keeper.pending = (tail, ns)
def last():
    tail, ns = keeper.pending
    keeper.pending = (None, None)
    return None if tail is None else eval(tail, ns)
keeper._wr_keep_last, keeper._wr_last = keep, last
"""
# the recursion limit: the loader's two frames are not the program's (guest/limits.py)
_RUN = """\
namespace = sys._getframe(1).f_globals
from _wasm_runner_guest import program
program.prepare(filename, code)
body, tail = program.compile_program(code, filename, show_last)
keeper._wr_keep_last(tail, namespace)
for cell in getattr(sys.setrecursionlimit, '__closure__', None) or ():
    if type(cell.cell_contents).__name__ == 'RecursionLimit':
        cell.cell_contents.begin(cell.cell_contents.depth + 2, cell.cell_contents.get())
exec(body, namespace)
"""
_RUN_PLAIN = """\
from _wasm_runner_guest import program
program.prepare(filename, code)
body = program.compile_program(code, filename)[0]
for cell in getattr(sys.setrecursionlimit, '__closure__', None) or ():
    if type(cell.cell_contents).__name__ == 'RecursionLimit':
        cell.cell_contents.begin(cell.cell_contents.depth + 2, cell.cell_contents.get())
exec(body, sys._getframe(1).f_globals)
"""


def setup(host: bool, network: bool, show_last: bool) -> str:
    """The loader's set-up code for a run with the ``host`` module, the network shim, and the
    user's last expression shown (``show_last``)."""
    keeper = "" if not show_last else (_HOST if host else _KEEPER)
    return (_BEGIN + (_NETWORK if network else "") + (_HOST if host and not show_last else "") + keeper
            + (_RUN if show_last else _RUN_PLAIN))


SETUP = setup(True, True, True)


def program(code: str, filename: str | None, names: Mapping[str, str] | None, display: bool | str,
            max_bytes: int, network: tuple[bool, str] | None = None) -> str:
    """The loader the wrapper runs (under ``WRAPPER_FILE``) for ``code``: with the functions
    ``names`` (name -> description; None: no ``host`` module) importable from ``host``
    (``max_bytes``: the run's ``host_call_bytes``), and with ``network`` = (on, the refusal
    sentence) the network shim installed (``guest/network.py``). ``display`` is the job's: when
    ``True`` the loader's last line evaluates the user's last expression for the wrapper to show."""
    net = None if network is None else (network[0], network[1])
    host = _HOST_SOURCE if names is not None else None
    args = (_CODEC_SOURCE if host else None, host, sorted(names or ()), dict(names or {}), max_bytes, net, code,
            filename or "<string>", display is True)
    code_of_setup = setup(host is not None, net is not None, display is True)
    lines = [f"exec(compile({code_of_setup!r}, {WRAPPER_FILE!r}, 'exec'), "
             f"{{'__builtins__': __builtins__, '_wr_args': {args!r}}})"]
    if display is True:
        keeper = "host" if names is not None else "_wr_loader"
        lines.append(f"__import__({keeper!r})._wr_last()")
    return "\n".join(lines) + "\n"


def prepare_program(functions: Mapping[str, HostFunction] | HostFunctions | None, code: str,
                    filename: str | None, display: bool | str, limits: Limits,
                    network: tuple[bool, str] | None = None) -> tuple[HostFunctions | None, str, str]:
    """(the functions checked, the loader to run in place of ``code``, the file name the job
    gets): what ``Sandbox.run`` and ``Session.run`` hand the wrapper for a run with functions
    or a network shim (``network``: (on, the refusal sentence)). ``InvalidFunctions`` when the
    functions cannot be given."""
    checked = None if functions is None else as_host_functions(functions)
    names = None if checked is None else checked.docs()
    return checked, program(code, filename, names, display, limits.host_call_bytes, network), WRAPPER_FILE
