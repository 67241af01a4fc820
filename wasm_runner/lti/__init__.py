"""wasm-runner as an LTI 1.3 tool (docs/lms.md, "LTI 1.3"): platforms registered in the server's
config (``registration``), single-use state and nonce kept server-side (``onetime``), the
platform's ``id_token`` validated with joserfc (``validation``), the launch session and Deep
Linking answers signed with the tool's own key (``tool``), grades sent with Assignment and Grade
Services (``ags``) through the durable outbox (``wasm_runner.outbox``, shared with the webhooks).
The HTTP routes are thin (``wasm_runner.http.routes.lti``); nothing here imports the HTTP face."""

from __future__ import annotations

from .registration import LtiSettings, Platform

__all__ = ["LtiSettings", "Platform"]
