"""ASGI entry point: ``wasm-runner serve`` (or ``uvicorn server:app``).

``create_app(config)`` builds the Starlette app: the JSON API under ``/api`` (see
``wasm_runner.http``), ``/healthz``, ``/metrics`` and the playground pages of ``wasm_runner.browser.pages``.
Without a config, settings come from ``$WASM_RUNNER_CONFIG`` and ``WASM_RUNNER_*`` variables.
"""

from __future__ import annotations

from starlette.applications import Starlette

from wasm_runner.http.app import build_app
from wasm_runner.settings import ServerConfig, load_config
from wasm_runner.browser.pages import page_routes

__all__ = ["app", "create_app"]


def create_app(config: ServerConfig | None = None) -> Starlette:
    """The wasm-runner web app: API routes plus the playground pages."""
    return build_app(config or load_config(), extra_routes=page_routes())


app = create_app()
