"""The LTI 1.3 claim names this tool reads and writes (IMS LTI Core 1.3, Deep Linking 2.0,
Assignment and Grade Services 2.0)."""

from __future__ import annotations

__all__ = [
    "AGS_ENDPOINT", "CONTENT_ITEMS", "CUSTOM", "DATA", "DEEP_LINKING_SETTINGS", "DEPLOYMENT_ID",
    "LTI_VERSION", "MESSAGE_TYPE", "RESOURCE_LINK", "ROLES", "SCOPE_LINEITEM", "SCOPE_SCORE",
    "TARGET_LINK_URI", "VERSION",
]  # fmt: skip

_LTI = "https://purl.imsglobal.org/spec/lti/claim/"
_DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
MESSAGE_TYPE = _LTI + "message_type"
VERSION = _LTI + "version"
DEPLOYMENT_ID = _LTI + "deployment_id"
TARGET_LINK_URI = _LTI + "target_link_uri"
RESOURCE_LINK = _LTI + "resource_link"
ROLES = _LTI + "roles"
CUSTOM = _LTI + "custom"
DEEP_LINKING_SETTINGS = _DL + "deep_linking_settings"
CONTENT_ITEMS = _DL + "content_items"
DATA = _DL + "data"
AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LTI_VERSION = "1.3.0"
