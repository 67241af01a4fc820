"""A server whose ``[network.test-api]`` rule names a loopback API (``loopback_api.py``), for the
network tests: ``network_config`` for an in-process server (``live_server``), ``network_toml``
for the same rule in a replica's TOML file (``replicas.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.live_server import make_config
from tests.support.loopback_api import LoopbackAPI
from wasm_runner.network import network_from
from wasm_runner.settings import ServerConfig

__all__ = ["RULE", "network_config", "network_toml", "api_rule"]

RULE = "test-api"


def api_rule(api: LoopbackAPI, **table: Any) -> dict[str, Any]:
    """The rule's table: the API's URL as its one destination, for the key ``alice`` unless
    ``table`` says otherwise (``keys``, ``profiles``, ``max_requests``, ...)."""
    return {"destinations": [f"http://127.0.0.1:{api.port}"], "keys": ["alice"], **table}


def network_config(folder: Path, api: LoopbackAPI, settings: dict[str, object] | None = None,
                   **table: Any) -> ServerConfig:
    """``make_config``'s server (its keys and profiles, and ``settings``) with the rule."""
    return make_config(folder, network=network_from({RULE: api_rule(api, **table)}), **(settings or {}))


def network_toml(api: LoopbackAPI, **table: Any) -> str:
    """The rule as a ``[network.test-api]`` table of a TOML file (values written as JSON, which
    TOML reads the same for strings, numbers and lists of strings)."""
    lines = [f"[network.{RULE}]"]
    lines += [f"{name} = {json.dumps(value)}" for name, value in api_rule(api, **table).items()]
    return "\n".join(lines) + "\n"
