"""The browser tier's pages alone (no run API), as an ASGI app for tests that need a server with
its own cache folder (``WASM_RUNNER_CACHE``) without compiling the server tier's runtimes there."""

from starlette.applications import Starlette

from wasm_runner.browser.pages import page_routes

__all__ = ["app"]

app = Starlette(routes=page_routes())
