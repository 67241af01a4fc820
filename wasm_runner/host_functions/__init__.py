"""Host functions: the app's own functions, called by the guest's code like Python functions.

    >>> from wasm_runner import run
    >>> run("from host import double\\nprint(double(21))", functions={"double": lambda x: 2 * x}).stdout
    '42\\n'

The guest imports them from the module ``host`` (``guest/host_module.py``, shipped as source with
each run: ``program``); each call crosses as plain data in codec.py's tagged JSON form and is
answered on the host by ``HostCalls`` (``calls``), within the run's ``host_calls``,
``host_call_bytes`` and ``host_seconds`` limits; ``records`` is what is kept of each call (never
the payload); ``loop`` runs coroutine functions when the caller has no loop. docs/host-functions.md.
"""

from .calls import HOST_LIMITS, HostCalls, RunState, describe_exception
from .functions import HostFunction, HostFunctions, InvalidFunctions, as_host_functions, check_name
from .loop import background_loop
from .program import NETWORK_SHIM, WRAPPER_FILE, prepare_program, program
from .records import OUTCOMES, UNKNOWN_NAME, CallRecord, CallTally

__all__ = [
    "HOST_LIMITS", "NETWORK_SHIM", "OUTCOMES", "UNKNOWN_NAME", "WRAPPER_FILE", "CallRecord", "CallTally", "HostCalls",
    "HostFunction", "HostFunctions", "InvalidFunctions", "RunState", "as_host_functions", "background_loop",
    "check_name", "describe_exception", "prepare_program", "program",
]
