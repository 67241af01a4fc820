"""The OpenAPI 3.1 description served at ``/api/openapi.json``.

Request schemas come from the pydantic models in ``schemas.py``; the result schema is the core's
``RESULT_JSON_SCHEMA``. The WebSocket endpoint cannot be described in OpenAPI; its protocol is in
the description text and in ``routes/interactive.py``. Of the LTI tool, the JSON an admin or a
platform reads is here (``/.well-known/jwks.json``, ``/lti/config``, ``/lti/canvas.json``); its
browser steps (the OIDC login, the launch and deep-linking form posts) and its own page's calls
(with a launch session, not an API key) follow the LTI 1.3 specifications: docs/lms.md.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic.json_schema import models_json_schema

from ..result import RESULT_JSON_SCHEMA
from .schemas import (LintRequest, NetworkRunRequest, NotebookRunRequest, RunRequest, SessionCreate, SessionFork,
                      SessionRunRequest)

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"

_DESCRIPTION = """Run untrusted Python in a WebAssembly sandbox (CPython on WASI under wasmtime).

Every refusal is a JSON object `{"error": {"code", "message", "details"?}}` with a 4xx status.
Busy answers (429) carry `Retry-After`. Streaming output: `POST /api/run/stream` (Server-Sent
Events: `start`, `stdout`, `stderr`, then `result`). Interactive input: WebSocket `/api/run/ws`
(first message `{"type": "run", "api_key"?, ...}`, then `stdin`/`eof`/`cancel` messages; the
server sends `start`, `stdout`, `stderr`, `input_wanted` and finally `result`).

The LTI 1.3 tool: `/.well-known/jwks.json`, `/lti/config` and `/lti/canvas.json` are described
here; its browser steps (`/lti/login`, `/lti/launch`, `/lti/deep-link`: the OIDC login and form
posts an LMS sends a browser through) and its page's own calls (`/lti/run`,
`/lti/exercises/{id}/check`, `/lti/grades/{id}`, with the `X-Wasm-Runner-Launch` session instead
of an API key) are in the project's docs/lms.md."""


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {"type": "array", "items": {"type": "object"}},
                },
            }
        },
    }


def _session_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["id", "profile", "runtime", "limits", "alive", "calls"],
        "properties": {
            "id": {"type": "string"},
            "profile": {"type": "string"},
            "runtime": {"type": "string"},
            "limits": {"type": "object"},
            "alive": {"type": "boolean"},
            "calls": {"type": "integer", "minimum": 0},
            "idle_expires_in": {"type": "number", "minimum": 0},
            "lifetime_expires_in": {"type": "number", "minimum": 0},
            "paused": {"type": "boolean", "description": "its instance is freed; the next call resumes it"},
            "saved": {"type": "boolean", "description": "its stored snapshot holds its state now"},
            "snapshot_error": {
                "type": "object", "description": "why its last snapshot was not stored (it stays live)",
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            },
            "lost_cells": {
                "type": "array", "items": {"type": "integer"},
                "description": "resumed on another replica from an older snapshot: the calls it lost",
            },
        },
    }


def _lint_schema() -> dict[str, Any]:
    text = {"type": "string"}
    number = {"type": "integer", "minimum": 1}
    finding = {
        "type": "object",
        "required": ["rule", "name", "kind", "severity", "title", "message", "detail",
                     "line", "column", "end_line", "end_column"],
        "properties": {
            "rule": text, "name": text, "kind": {"enum": ["beginner", "style", "syntax"]},
            "severity": {"enum": ["error", "warning", "info"]}, "title": text,
            "message": {"type": "string", "description": "plain words (the shared table)"},
            "detail": {"type": "string", "description": "Ruff's own message"},
            "line": number, "column": number, "end_line": number, "end_column": number,
        },
    }  # fmt: skip
    return {"type": "object", "required": ["findings"],
            "properties": {"findings": {"type": "array", "items": finding}}}


def _jwks_schema() -> dict[str, Any]:
    key = {
        "type": "object", "required": ["kty", "kid"],
        "properties": {"kty": {"const": "RSA"}, "kid": {"type": "string"}, "n": {"type": "string"},
                       "e": {"type": "string"}, "alg": {"type": "string"}, "use": {"type": "string"}},
    }  # fmt: skip
    return {"type": "object", "required": ["keys"], "properties": {"keys": {"type": "array", "items": key}}}


def _lti_config_schema() -> dict[str, Any]:
    url = {"type": "string", "format": "uri"}
    return {
        "type": "object", "required": ["login_url", "launch_url", "deep_linking_url", "jwks_url", "redirect_uris"],
        "properties": {"login_url": url, "launch_url": url, "deep_linking_url": url, "jwks_url": url,
                       "redirect_uris": {"type": "array", "items": url}},
    }  # fmt: skip


_NO_LTI = {"description": "No LTI platform is registered on this server (lti_not_configured)",
           "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}  # fmt: skip


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Malformed request (bad JSON)",
        401: "Missing or invalid API key",
        403: "This key may not use the profile (or a snapshot is another key's: snapshot_refused)",
        404: "Unknown session, file or saved session",
        409: "The session is running another call",
        410: "The replica holding this session or file is gone (session_lost, download_lost); a "
             "saved session expired (saved_session_expired)",
        413: "Body too large",
        415: "Body is not application/json (a snapshot: application/octet-stream)",
        422: "Invalid fields, limits, base64 or profile; a snapshot refused (details: reason)",
        429: "Rate limited, or the server is busy (see Retry-After)",
        501: "This server keeps no saved sessions (saving_unavailable)",
        507: "Over the key's snapshot disk budget, or the disk is full; the session stays live",
    }
    out: dict[str, Any] = {}
    for status in statuses:
        out[str(status)] = {"description": text[status], "content": _json("Error")}
        if status == 429:
            out[str(status)]["headers"] = {
                "Retry-After": {"schema": {"type": "string"}, "description": "seconds"}
            }
    return out


_RUN_ERRORS = (400, 401, 403, 413, 415, 422, 429)

_NETWORK_GRANT = {
    "type": "object",
    "required": ["on"],
    "properties": {
        "on": {"type": "boolean"},
        "token": {"type": "string", "description": "the run's grant: POST /api/network/fetch"},
        "seconds": {"type": "number", "description": "how long the grant lasts"},
        "refusal": {"type": "string", "description": "the sentence every request raises"},
    },
}

_SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["start", "stdout", "stderr", "result", "error"]},
        "data": {"type": "string", "description": "JSON: {data} for output, the result object, …"},
    },
}


def _binary() -> dict[str, Any]:
    return {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def openapi_document() -> dict[str, Any]:
    """The whole description, built fresh (callers may cache it)."""
    _, defs = models_json_schema(
        [(m, "validation") for m in (RunRequest, SessionCreate, SessionFork, SessionRunRequest, LintRequest,
                                             NetworkRunRequest, NotebookRunRequest)],
        ref_template=_REF,
    )
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    result = copy.deepcopy(RESULT_JSON_SCHEMA)
    result.pop("$schema", None)
    schemas["Result"] = result
    schemas["Error"] = _error_schema()
    schemas["Session"] = _session_schema()
    schemas["LintFindings"] = _lint_schema()
    schemas["Jwks"] = _jwks_schema()
    schemas["LtiConfig"] = _lti_config_schema()
    schemas["SavedSession"] = {
        "type": "object",
        "required": ["saved_id", "profile", "runtime", "bytes", "expires_in"],
        "properties": {
            "saved_id": {"type": "string", "description": "the handle: POST /api/saved-sessions/{saved_id}/resume"},
            "profile": {"type": "string"}, "runtime": {"type": "string"},
            "bytes": {"type": "integer", "minimum": 0},
            "expires_in": {"type": "number", "description": "seconds until it is deleted"},
        },
    }  # fmt: skip
    schemas["NotebookRun"] = {
        "type": "object",
        "required": ["notebook", "status", "cells_run", "failed"],
        "properties": {
            "notebook": {"type": "object", "description": "the executed notebook (nbformat 4.5)"},
            "status": {"type": "string", "description": "ok, or the status of the first cell that failed"},
            "cells_run": {"type": "integer", "minimum": 0},
            "failed": {"type": ["object", "null"], "description": "the cell that failed: cell (its "
                       "index), status, limit, message"},
        },
    }  # fmt: skip
    schemas["SessionResult"] = {
        "allOf": [
            {"$ref": "#/components/schemas/Result"},
            {
                "type": "object",
                "required": ["session"],
                "properties": {"session": {"$ref": "#/components/schemas/Session"}},
            },
        ]
    }
    session_id = {
        "name": "session_id", "in": "path", "required": True, "schema": {"type": "string"},
    }  # fmt: skip
    saved_id = {"name": "saved_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "wasm-runner", "version": "0.1.0", "description": _DESCRIPTION},
        "security": [{"bearer": []}, {"apiKey": []}],
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "Liveness",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "The server is up",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }  # fmt: skip
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness (for a load balancer)",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Ready: status is 'ready'",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "503": {
                            "description": "Not ready: status is 'warming', 'draining' or "
                            "'shared_state_unavailable'",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                    },
                }  # fmt: skip
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Prometheus text format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }  # fmt: skip
            },
            "/.well-known/jwks.json": {
                "get": {
                    "summary": "The public keys of the server's signatures (signed check results, the LTI "
                               "tool's messages), as a JWKS: the signing key first",
                    "security": [],
                    "responses": {"200": {"description": "The key set (RS256, a kid each)", "content": _json("Jwks")}},
                }  # fmt: skip
            },
            "/lti/config": {
                "get": {
                    "summary": "The URLs an LMS admin registers for the LTI 1.3 tool",
                    "security": [],
                    "responses": {"200": {"description": "Login, launch, deep-linking and JWKS URLs",
                                          "content": _json("LtiConfig")}, "404": _NO_LTI},
                }  # fmt: skip
            },
            "/lti/canvas.json": {
                "get": {
                    "summary": "The LTI 1.3 tool's configuration as a Canvas developer key reads it (Enter URL)",
                    "security": [],
                    "responses": {"200": {"description": "Canvas's LTI 1.3 JSON configuration",
                                          "content": {"application/json": {"schema": {"type": "object"}}}},
                                  "404": _NO_LTI},
                }  # fmt: skip
            },
            "/api/profiles": {
                "get": {
                    "summary": "Profiles this key may use, with their limits",
                    "responses": {
                        "200": {
                            "description": "Profiles",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **_errors(401, 429),
                    },
                }  # fmt: skip
            },
            "/api/run": {
                "post": {
                    "summary": "Run code in a fresh sandbox instance",
                    "requestBody": {"required": True, "content": _json("RunRequest")},
                    "responses": {
                        "200": {"description": "The result object", "content": _json("Result")},
                        **_errors(*_RUN_ERRORS),
                    },
                }
            },
            "/api/network/runs": {
                "post": {
                    "summary": "The network of one browser-tier run: a grant when a [network] rule names "
                               "the key and profile, else the sentence its requests raise",
                    "requestBody": {"required": False, "content": _json("NetworkRunRequest")},
                    "responses": {
                        "200": {"description": "A grant (on, token, seconds) or the refusal (on, refusal)",
                                "content": {"application/json": {"schema": _NETWORK_GRANT}}},
                        **_errors(400, 401, 403, 413, 415, 422, 429),
                    },
                }
            },
            "/api/lint": {
                "post": {
                    "summary": "Mark beginner mistakes (Ruff, in plain words; the editor's lint)",
                    "requestBody": {"required": True, "content": _json("LintRequest")},
                    "responses": {
                        "200": {"description": "The findings", "content": _json("LintFindings")},
                        **_errors(400, 401, 413, 415, 422, 429),
                    },
                }
            },
            "/api/run/stream": {
                "post": {
                    "summary": "Run code, streaming output as Server-Sent Events",
                    "requestBody": {"required": True, "content": _json("RunRequest")},
                    "responses": {
                        "200": {
                            "description": "Events: start, stdout, stderr, then result (each "
                            "event's data is one JSON object)",
                            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
                        },
                        **_errors(*_RUN_ERRORS),
                    },
                }
            },
            "/api/notebooks/run": {
                "post": {
                    "summary": "Run a notebook's code cells in one new session; the executed notebook back",
                    "requestBody": {"required": True, "content": _json("NotebookRunRequest")},
                    "responses": {
                        "200": {"description": "The executed notebook (nbformat 4.5) and how its run "
                                "went", "content": _json("NotebookRun")},
                        **_errors(*_RUN_ERRORS),
                    },
                }
            },
            "/api/sessions": {
                "post": {
                    "summary": "Open a session (a long-lived instance keeping state)",
                    "requestBody": {"required": False, "content": _json("SessionCreate")},
                    "responses": {
                        "201": {"description": "The new session", "content": _json("Session")},
                        **_errors(*_RUN_ERRORS),
                    },
                }
            },
            "/api/sessions/{session_id}": {
                "parameters": [session_id],
                "get": {
                    "summary": "Describe a session",
                    "responses": {
                        "200": {"description": "The session", "content": _json("Session")},
                        **_errors(401, 404, 410, 429),
                    },
                },
                "delete": {
                    "summary": "End a session",
                    "responses": {"204": {"description": "Ended"}, **_errors(401, 404, 410, 429)},
                },
            },
            "/api/sessions/{session_id}/run": {
                "parameters": [session_id],
                "post": {
                    "summary": "Run code in a session",
                    "requestBody": {"required": True, "content": _json("SessionRunRequest")},
                    "responses": {
                        "200": {
                            "description": "The result object plus the session's state",
                            "content": _json("SessionResult"),
                        },
                        **_errors(400, 401, 404, 409, 410, 413, 415, 422, 429),
                    },
                },
            },
            "/api/sessions/{session_id}/run/stream": {
                "parameters": [session_id],
                "post": {
                    "summary": "Run code in a session, streaming output as Server-Sent Events",
                    "requestBody": {"required": True, "content": _json("SessionRunRequest")},
                    "responses": {
                        "200": {
                            "description": "Events: start, stdout, stderr, then result (the "
                            "result object plus the session's state)",
                            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
                        },
                        **_errors(400, 401, 404, 409, 410, 413, 415, 422, 429),
                    },
                },
            },
            "/api/sessions/{session_id}/fork": {
                "parameters": [session_id],
                "post": {
                    "summary": "Copy a session's state into new, independent sessions",
                    "requestBody": {"required": False, "content": _json("SessionFork")},
                    "responses": {
                        "201": {
                            "description": "The copies, each a new session of this key",
                            "content": {"application/json": {"schema": {
                                "type": "object", "required": ["sessions"],
                                "properties": {"sessions": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/Session"},
                                }},
                            }}},
                        },
                        **_errors(400, 401, 404, 409, 410, 413, 415, 422, 429),
                    },
                },  # fmt: skip
            },
            "/api/sessions/{session_id}/snapshot": {
                "parameters": [session_id],
                "get": {
                    "summary": "Save a session: its state as sealed bytes (encrypted, this key's)",
                    "responses": {
                        "200": {
                            "description": "The snapshot; POST /api/sessions/resume takes it back",
                            "content": _binary(),
                        },
                        **_errors(401, 404, 409, 410, 422, 429),
                    },
                },
            },
            "/api/sessions/{session_id}/save": {
                "parameters": [session_id],
                "post": {
                    "summary": "Keep a session's state on the server under a saved_id of this key's",
                    "responses": {
                        "201": {"description": "The saved state's handle", "content": _json("SavedSession")},
                        **_errors(401, 404, 409, 410, 422, 429, 501, 507),
                    },
                },
            },
            "/api/saved-sessions/{saved_id}/resume": {
                "parameters": [saved_id],
                "post": {
                    "summary": "Open a session continuing a state this key saved (under its profile)",
                    "responses": {
                        "201": {"description": "The new session", "content": _json("Session")},
                        **_errors(401, 403, 404, 410, 422, 429, 501),
                    },
                },
            },
            "/api/saved-sessions/{saved_id}": {
                "parameters": [saved_id],
                "delete": {
                    "summary": "Delete a state this key saved",
                    "responses": {"204": {"description": "Deleted"}, **_errors(401, 404, 501)},
                },
            },
            "/api/sessions/resume": {
                "post": {
                    "summary": "Open a session continuing a snapshot this key saved",
                    "parameters": [{
                        "name": "profile", "in": "query", "required": False,
                        "description": "the profile the saved session was opened under (optional: "
                        "the snapshot records it; another one is 422 profile_mismatch)",
                        "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "maxLength": 64},
                    }],
                    "requestBody": {"required": True, "content": _binary()},
                    "responses": {
                        "201": {"description": "The new session", "content": _json("Session")},
                        **_errors(400, 401, 403, 413, 415, 422, 429),
                    },
                },  # fmt: skip
            },
            "/api/files/{token}": {
                "parameters": [
                    {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "get": {
                    "summary": "Download a file a run wrote (short-lived link)",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "The file",
                            "content": {
                                "application/octet-stream": {
                                    "schema": {"type": "string", "format": "binary"}
                                }
                            },
                        },
                        **_errors(404, 410),
                    },
                },  # fmt: skip
            },
        },
    }
