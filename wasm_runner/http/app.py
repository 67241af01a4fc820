"""The HTTP face's app builders: ``build_app(config)`` is ``wasm_runner.assembly.build_app`` (the
service assembled from its settings, mounted by ``mount.py``) and ``create_app(config)`` the same
with the playground pages (what ``wasm-runner serve`` and ``server.py`` serve), here where a caller
of the face looks for them. The one module of the face that imports the assembly (an import-linter
contract: the rest of ``http/`` translates requests and responses)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..packages.tiers import BrowserModules
from ..settings import ServerConfig

__all__ = ["build_app", "create_app"]


def build_app(config: ServerConfig, extra_routes: Sequence[BaseRoute] = (),
              browser_modules: BrowserModules | None = None) -> Starlette:
    """The wasm-runner app for ``config``; ``extra_routes`` are mounted after the API's
    (``browser_modules``: the browser tier's modules, when they include its pages:
    ``browser.pages.browser_modules_source()``)."""
    from ..assembly import build_app as assembled

    return assembled(config, extra_routes, browser_modules)


def create_app(config: ServerConfig | None = None) -> Starlette:
    """The wasm-runner web app: API routes, ``/mcp`` and the playground pages (without a config,
    settings come from ``$WASM_RUNNER_CONFIG`` and ``WASM_RUNNER_*`` variables)."""
    from ..assembly import create_app as assembled

    return assembled(config)
