"""What a run may call: ``HostFunctions`` (name -> callable, descriptions, the loop coroutines
run on, who hears of each call) and the rules a function's name follows."""

from __future__ import annotations

import asyncio
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import WasmRunnerError
from .records import CallRecord

__all__ = ["MAX_FUNCTIONS", "HostFunction", "HostFunctions", "InvalidFunctions", "as_host_functions",
           "check_name"]

MAX_FUNCTIONS = 256
MAX_NAME_CHARS = 100
MAX_DESCRIPTION_CHARS = 4000
RESERVED = frozenset({"HostError"})  # the guest's ``host`` module defines these itself

HostFunction = Callable[..., Any]  # plain data in, plain data out; a coroutine function too


class InvalidFunctions(WasmRunnerError, ValueError):
    """Functions a run cannot be given: a name that is not a plain identifier, not callable."""


def check_name(name: object) -> str:
    """``name`` when a guest can import it from ``host``; ``InvalidFunctions`` else."""
    if (type(name) is not str or not name.isidentifier() or not name.isascii() or keyword.iskeyword(name)
            or name.startswith("_") or len(name) > MAX_NAME_CHARS or name in RESERVED):
        raise InvalidFunctions(f"{str(name)[:MAX_NAME_CHARS]!r} cannot be a host function's name: a name "
                               f"is an ASCII identifier of at most {MAX_NAME_CHARS} characters, not a "
                               "keyword, not starting with '_', not HostError")
    return name


@dataclass(frozen=True)
class HostFunctions:
    """The app's functions a run may call (``from host import name`` in the guest).

    ``functions``: name -> callable (a coroutine function runs on ``loop``, or on a background
    loop when it is None). ``descriptions``: name -> the docstring the guest sees. ``on_call``
    hears of every call once it ended (a ``CallRecord``, on the guest's thread: it must be quick
    and must not raise)."""

    functions: Mapping[str, HostFunction]
    descriptions: Mapping[str, str] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None
    on_call: Callable[[CallRecord], None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.functions, Mapping):
            raise InvalidFunctions(f"functions must be a mapping of names to callables, not "
                                   f"{type(self.functions).__name__}")
        if len(self.functions) > MAX_FUNCTIONS:
            raise InvalidFunctions(f"at most {MAX_FUNCTIONS} functions per run, got {len(self.functions)}")
        for name, fn in self.functions.items():
            check_name(name)
            if not callable(fn):
                raise InvalidFunctions(f"the host function {name!r} is not callable "
                                       f"(a {type(fn).__name__})")
        for name, text in self.descriptions.items():
            if name not in self.functions or type(text) is not str:
                raise InvalidFunctions(f"a description must be text for a function given, not {name!r}")

    def docs(self) -> dict[str, str]:
        """name -> the guest's docstring (its description, shortened)."""
        return {name: self.descriptions.get(name, "")[:MAX_DESCRIPTION_CHARS] for name in self.functions}


def as_host_functions(functions: Mapping[str, HostFunction] | HostFunctions) -> HostFunctions:
    """``functions`` as ``HostFunctions`` (a mapping: without descriptions, a background loop)."""
    return functions if isinstance(functions, HostFunctions) else HostFunctions(functions)
