"""The API's routes, one module per concept; ``api_routes()`` lists them all."""

from __future__ import annotations

from starlette.routing import BaseRoute

from . import exercises, files, interactive, lint, lti, meta, network, notebooks, run, sessions, stream

__all__ = ["api_routes"]


def api_routes() -> list[BaseRoute]:
    return [
        *meta.routes(),
        *run.routes(),
        *stream.routes(),
        *interactive.routes(),
        *sessions.routes(),
        *files.routes(),
        *exercises.routes(),
        *lint.routes(),
        *lti.routes(),
        *network.routes(),
        *notebooks.routes(),
    ]
