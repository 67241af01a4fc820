"""ASGI entry point for ``uvicorn server:app`` (``wasm-runner serve`` builds the same app from the
package: ``wasm_runner.http.app.create_app``).

The app is ``wasm_runner.assembly``'s: the service built from the settings (``$WASM_RUNNER_CONFIG``
and ``WASM_RUNNER_*`` variables without a config), the JSON API under ``/api``, ``/mcp``,
``/healthz``, ``/metrics`` and the playground pages.
"""

from __future__ import annotations

from wasm_runner.assembly import create_app

__all__ = ["app", "create_app"]

app = create_app()
