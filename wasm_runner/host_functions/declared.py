"""Host functions an operator declares for the HTTP service and MCP (the ``[functions.NAME]``
tables of the server's config): what each is, where a call goes, who may use it.

::

    [functions.lookup_order]
    description = "An order of the shop by its id: its total and items."
    parameters = { type = "object", properties = { order_id = { type = "integer" } },
                   required = ["order_id"], additionalProperties = false }
    url = "https://shop.example/api/tools/lookup_order"  # or entry_point = "shop.tools:lookup_order"
    secret_file = "/run/secrets/lookup_order"            # the endpoint's own secret (url only)
    allow = ["10.1.2.3"]       # loopback or private addresses the endpoint may reach, the only
                               # ones an http:// URL may (default none)
    timeout_seconds = 10
    keys = ["chat-app"]        # API keys that may use it ("*": every caller); none: nobody
    profiles = ["analyst"]     # the profiles it may run under; none: every profile

A request names the functions it wants (``functions`` in ``POST /api/run``); each must be
declared and allowed for the caller's key and profile. The guest calls them with positional or
keyword arguments; they are bound to ``parameters``' properties in order, as an object, checked
against the schema (in codec.py's tagged JSON form: the form the endpoint receives; each tag
also as the value it stands for, ``_schema_view``) and sent to the endpoint (``endpoint.py``:
signed, naming the key and the user) or passed to the entry point as keyword arguments. Only the
parameters the schema declares (``DeclaredFunction.declares``) get through. ``Catalog`` holds the declared functions with their secrets loaded and
entry points imported; ``Catalog.for_caller`` makes a run's ``HostFunctions``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema

from .. import codec
from ..errors import WasmRunnerError
from .endpoint import Endpoint, parse_allow
from .functions import HostFunction, HostFunctions, check_name

__all__ = ["ANY_CALLER", "Caller", "Catalog", "DeclaredFunction", "describe_functions", "functions_from"]

ANY_CALLER = "*"
MIN_SECRET_CHARS = 32
_KEYS = {"description", "parameters", "url", "entry_point", "secret_file", "secret", "allow",
         "timeout_seconds", "keys", "profiles"}


@dataclass(frozen=True)
class DeclaredFunction:
    """One ``[functions.NAME]`` table, checked."""

    name: str
    description: str
    parameters: dict[str, Any]
    url: str | None = None
    entry_point: str | None = None
    secret: str | None = field(default=None, repr=False)
    allow: tuple[str, ...] = ()
    timeout_seconds: float = 10.0
    keys: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()

    def allowed(self, key: str, profile: str) -> bool:
        """Whether the caller ``key`` (an API key's name) may use it under ``profile``."""
        return (ANY_CALLER in self.keys or key in self.keys) and (not self.profiles or profile in self.profiles)

    @property
    def parameter_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    def declares(self, key: str) -> bool:
        """Whether the keyword ``key`` is a parameter of the schema: one of its ``properties``,
        matched by its ``patternProperties``, or any when it sets ``additionalProperties`` to
        anything but false. Others never reach the function (the default schema declares none)."""
        if key in self.parameters.get("properties", {}):
            return True
        if any(re.search(p, key) for p in self.parameters.get("patternProperties", {})):
            return True
        return self.parameters.get("additionalProperties", False) is not False


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _function_from(name: str, table: Any) -> DeclaredFunction:
    where = f"[functions.{name}]"
    check_name(name)
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table")
    unknown = set(table) - _KEYS
    if unknown:
        raise ValueError(f"unknown {where} setting(s): {sorted(unknown)}")
    description = table.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"{where} needs a description (what a model reads to call it)")
    parameters = table.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ValueError(f"{where} parameters must be a JSON schema of type object")
    parameters = json.loads(json.dumps(parameters))  # plain dicts and lists
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as e:
        raise ValueError(f"{where} parameters is not a valid JSON schema: {e.message}") from None
    if not isinstance(parameters.get("properties", {}), Mapping):
        raise ValueError(f"{where} parameters.properties must be a table")
    url, entry = table.get("url"), table.get("entry_point")
    if (url is None) == (entry is None):
        raise ValueError(f"{where} needs exactly one of url (an endpoint of the app) and entry_point")
    secret = table.get("secret")
    if table.get("secret_file") is not None:
        try:
            secret = Path(str(table["secret_file"])).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ValueError(f"{where} cannot read secret_file: {e.strerror}") from None
    if url is not None:
        if not isinstance(secret, str) or len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"{where} needs a secret_file holding at least {MIN_SECRET_CHARS} characters "
                             "(the endpoint checks each call's signature with it)")
        try:
            Endpoint(str(url), secret.encode(), parse_allow(_strings(table.get("allow", []), f"{where} allow")))
        except ValueError as e:
            raise ValueError(f"{where} {e}") from None
    elif not isinstance(entry, str) or entry.count(":") != 1:
        raise ValueError(f"{where} entry_point must be 'package.module:function'")
    timeout = table.get("timeout_seconds", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise ValueError(f"{where} timeout_seconds must be a number of seconds in (0, 600]")
    return DeclaredFunction(
        name=name, description=description.strip(), parameters=parameters, url=url, entry_point=entry,
        secret=secret, allow=_strings(table.get("allow", []), f"{where} allow"), timeout_seconds=float(timeout),
        keys=_strings(table.get("keys", []), f"{where} keys"),
        profiles=_strings(table.get("profiles", []), f"{where} profiles"))


def functions_from(tables: Any) -> dict[str, DeclaredFunction]:
    """The ``[functions]`` tables of a config, checked; ``ValueError`` with a plain message."""
    if not isinstance(tables, Mapping):
        raise ValueError("[functions] must hold one table per function")
    return {name: _function_from(name, table) for name, table in tables.items()}


@dataclass(frozen=True)
class Caller:
    """Who a run is for, as an endpoint is told: the key's name, the user's id (the app's own,
    never stored or logged), the request's id."""

    key: str
    user: str | None
    request_id: str


def _bind(fn: DeclaredFunction, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments as one object: positional ones bound to the properties in order."""
    names = fn.parameter_names
    if len(args) > len(names):
        raise TypeError(f"{fn.name}() takes at most {len(names)} positional arguments ({len(args)} given)")
    arguments = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key in arguments:
            raise TypeError(f"{fn.name}() got multiple values for argument {key!r}")
        arguments[key] = value
    return arguments


def _check(fn: DeclaredFunction, validator: jsonschema.protocols.Validator, arguments: dict[str, Any]) -> None:
    """The arguments against the schema (``ValueError`` naming where and why), then against the
    parameters it declares (``TypeError`` for a keyword it does not: it never reaches the function)."""
    try:
        error = next(iter(validator.iter_errors(_schema_view(codec.to_tagged(arguments)))), None)
    except _Uncheckable as e:
        raise ValueError(f"{fn.name}(): {e}") from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the arguments"
        raise ValueError(f"{fn.name}(): {where}: {error.message[:300]}")
    for key in arguments:
        if not fn.declares(key):
            raise TypeError(f"{fn.name}() got an unexpected keyword argument {key[:100]!r} (not a parameter "
                            "its schema declares)")


# -- what a schema sees: the tagged form, each tag carrying the value it stands for -------------
_ARRAY_KEYWORDS = frozenset({"items", "prefixItems", "maxItems", "minItems", "uniqueItems", "contains",
                             "unevaluatedItems"})
_STRING_KEYWORDS = frozenset({"maxLength", "minLength", "pattern"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


class _Uncheckable(WasmRunnerError, ValueError):
    """Arguments a schema cannot be asked about (a dict whose keys collide as text)."""


class _Tag(dict[str, Any]):
    """A tag of codec's tagged form (``{"$tuple": [...]}``) as a schema sees it: still that object
    (what the endpoint receives: ``type`` and a schema describing the tag judge it as before), and
    also the value it stands for, which the schema's array, string and number keywords check (a
    tuple or set as an array, bytes by their length and bytes, an int of any size or a non-finite
    float as a number): a schema without ``type`` no longer lets a tag pass unchecked."""

    value: Any


def _tag(data: dict[str, Any], value: Any) -> _Tag:
    tag = _Tag(data)
    tag.value = value
    return tag


def _schema_view(data: Any) -> Any:
    """The tagged form ``data`` (of ``codec.to_tagged``) as the schema sees it: a dict of any keys
    (``{"$dict": [...]}``: ``$``-prefixed or non-text keys) as the object it is, a non-text key
    as its tagged JSON text; every other tag a ``_Tag``."""
    if type(data) is list:
        return [_schema_view(v) for v in data]
    if type(data) is not dict:
        return data
    if len(data) == 1:
        ((key, body),) = data.items()
        if key == "$dict":
            out: dict[str, Any] = {}
            for k, v in body:
                name = k if type(k) is str else json.dumps(k, separators=(",", ":"), ensure_ascii=False)
                if name in out:
                    raise _Uncheckable(f"a dict whose keys collide as text ({name[:100]!r}) cannot be "
                                       "checked against the schema")
                out[name] = _schema_view(v)
            return out
        if key in ("$tuple", "$set", "$frozenset"):
            items = [_schema_view(v) for v in body]
            return _tag({key: items}, items)
        if key in ("$bytes", "$int", "$float", "$complex"):
            return _tag(data, codec.from_tagged(data))
    return {k: _schema_view(v) for k, v in data.items()}


def _keyword(name: str, check: Any) -> Any:
    """Draft 2020-12's keyword ``name``, also applied to the value a ``_Tag`` stands for."""
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if type(instance) is _Tag:
            v = instance.value
            if name in _ARRAY_KEYWORDS and type(v) is list:
                instance = v
            elif name in _STRING_KEYWORDS and type(v) is bytes:
                yield from _bytes_keyword(name, value, v)
                return
            elif name in _NUMBER_KEYWORDS and type(v) in (int, float, complex):
                if type(v) is complex or v != v or (name == "multipleOf" and v in (math.inf, -math.inf)):
                    yield jsonschema.ValidationError(f"{v!r} is not a number that {name} can compare")
                    return
                instance = v
        try:
            yield from check(validator, value, instance, schema)
        except (OverflowError, ValueError):  # an int too large to divide by a float or to show
            if type(instance) is not int:
                raise
            if name == "multipleOf" and (Fraction(instance) / Fraction(value)).denominator == 1:
                return
            yield jsonschema.ValidationError(f"an int of {instance.bit_length()} bits is not within {name} {value}")
    return keyword


def _bytes_keyword(name: str, value: Any, data: bytes) -> Any:
    if name == "maxLength" and len(data) > value:
        yield jsonschema.ValidationError(f"the bytes are longer than {value} ({len(data)} bytes)")
    elif name == "minLength" and len(data) < value:
        yield jsonschema.ValidationError(f"the bytes are shorter than {value} ({len(data)} bytes)")
    elif name == "pattern" and not re.search(value, data.decode("latin-1")):
        yield jsonschema.ValidationError(f"the bytes do not match {value!r}")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {name: _keyword(name, jsonschema.Draft202012Validator.VALIDATORS[name])
     for name in _ARRAY_KEYWORDS | _STRING_KEYWORDS | _NUMBER_KEYWORDS})


class Catalog:
    """The declared functions, ready to call: secrets loaded, entry points imported (``ValueError``
    when one cannot be). Every replica loads the same config, so every replica has them."""

    def __init__(self, declared: Mapping[str, DeclaredFunction]) -> None:
        self.declared = dict(declared)
        self._validators = {n: _Validator(f.parameters) for n, f in self.declared.items()}
        self._targets: dict[str, Callable[..., Any]] = {}
        self._endpoints: dict[str, Endpoint] = {}
        for name, fn in self.declared.items():
            if fn.entry_point is not None:
                module, _, attr = fn.entry_point.partition(":")
                try:
                    target = getattr(importlib.import_module(module), attr)
                except (ImportError, AttributeError) as e:
                    raise ValueError(f"[functions.{name}] entry_point {fn.entry_point!r} cannot be "
                                     f"imported ({e})") from None
                if not callable(target):
                    raise ValueError(f"[functions.{name}] entry_point {fn.entry_point!r} is not callable")
                self._targets[name] = target
            else:
                assert fn.url is not None and fn.secret is not None
                self._endpoints[name] = Endpoint(fn.url, fn.secret.encode(), parse_allow(fn.allow),
                                                 timeout_seconds=fn.timeout_seconds)

    def allowed(self, key: str, profile: str) -> list[DeclaredFunction]:
        """The functions the caller ``key`` may use under ``profile``, by name."""
        return [f for _, f in sorted(self.declared.items()) if f.allowed(key, profile)]

    def refused(self, names: Sequence[str], key: str, profile: str) -> list[str]:
        """Which of ``names`` the caller may not use (undeclared ones included)."""
        return [n for n in names if n not in self.declared or not self.declared[n].allowed(key, profile)]

    def for_caller(self, names: Sequence[str], caller: Caller) -> HostFunctions:
        """The run's functions: ``names`` (already allowed: ``refused``) bound to ``caller``."""
        fns = {name: self._callable(self.declared[name], caller) for name in names}
        return HostFunctions(fns, descriptions={n: self.declared[n].description for n in names})

    def _callable(self, fn: DeclaredFunction, caller: Caller) -> HostFunction:
        validator = self._validators[fn.name]
        endpoint = self._endpoints.get(fn.name)
        if endpoint is not None:
            async def call_endpoint(*args: Any, **kwargs: Any) -> Any:
                arguments = _bind(fn, args, kwargs)
                _check(fn, validator, arguments)
                return await endpoint.call(fn.name, arguments, key=caller.key, user=caller.user,
                                           request_id=caller.request_id)
            return call_endpoint
        target = self._targets[fn.name]
        if inspect.iscoroutinefunction(target):
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                arguments = _bind(fn, args, kwargs)
                _check(fn, validator, arguments)
                return await target(**arguments)
            return call_async

        def call(*args: Any, **kwargs: Any) -> Any:
            arguments = _bind(fn, args, kwargs)
            _check(fn, validator, arguments)
            return target(**arguments)
        return call


def describe_functions(functions: Sequence[DeclaredFunction]) -> str:
    """The functions as a model reads them in a tool's description: how to import them, each
    one's signature, description and JSON schema of its arguments."""
    if not functions:
        return ""
    lines = ["Functions of the app your code can call: `from host import NAME`, then call it like a "
             "Python function with plain data (numbers, strings, lists, dicts); it returns plain data "
             "or raises an exception with the app's message."]
    for fn in functions:
        signature = ", ".join(fn.parameter_names)
        lines.append(f"- {fn.name}({signature}): {fn.description} Arguments (JSON schema): "
                     f"{json.dumps(fn.parameters, separators=(',', ':'))}")
    return "\n".join(lines)
