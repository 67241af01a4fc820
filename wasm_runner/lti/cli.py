"""``wasm-runner lti``: what an LMS admin types into Moodle or Canvas to register this server as an
LTI 1.3 tool, and the platforms the config registers already (checked as the server would).

    wasm-runner lti --url https://runner.example.org [--config server.toml]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .tool import ToolUrls

__all__ = ["main", "registration_text"]


def registration_text(urls: ToolUrls, platforms: Sequence[str]) -> str:
    lines = [
        "Register wasm-runner as an LTI 1.3 tool (docs/lms.md, 'LTI 1.3'):",
        "",
        f"  Tool URL / Target link URI:        {urls.launch}",
        f"  Initiate login URL (OIDC login):   {urls.login}",
        f"  Redirection URI(s):                {' '.join(urls.redirect_uris)}",
        f"  Deep linking (content selection):  {urls.deep_linking}",
        f"  Public keyset URL (JWKS):          {urls.jwks}",
        "  Signature method / key type:       RSA (RS256), keyset URL",
        "  Services:                          Assignment and Grade Services (line items, scores);",
        "                                     Deep Linking (content-item message)",
        "  Custom parameter for a link:       exercise=<exercise id> (Deep Linking sets it)",
        "",
        "Moodle: Site administration > Plugins > Activity modules > External tool > Manage tools >",
        "  configure a tool manually: the URLs above; 'Supports Deep Linking' on; IMS LTI Assignment",
        "  and Grade Services: 'Use this service for grade sync and column management'.",
        "Canvas: Admin > Developer Keys > + Developer Key > LTI Key, Method 'Enter URL':",
        f"  {urls.canvas_json}  (or Manual Entry: the URLs above; scopes: line items and score;",
        "  placements: Link Selection / Assignment Selection, message type LtiDeepLinkingRequest).",
        "",
        "Then put what the LMS shows (issuer, client id, deployment id, its auth, token and keyset",
        "URLs) in the server's config as [[lti.platforms]].",
        "",
    ]
    lines.append("Platforms registered: " + (", ".join(platforms) if platforms else "none yet"))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="wasm-runner lti", description="print what an LMS admin registers")
    p.add_argument("--url", help="this server's public base URL (default: [server] advertise_url)")
    p.add_argument("--config", metavar="TOML", help="the server's config file (its [[lti.platforms]] are checked)")
    args = p.parse_args(argv)
    from ..settings import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"wasm-runner lti: {exc}", file=sys.stderr)
        return 2
    base = args.url or config.scale_out.advertise_url
    if not base:
        print("wasm-runner lti: say this server's public URL with --url https://runner.example.org "
              "(the LMS's browsers and servers must reach it)", file=sys.stderr)  # fmt: skip
        return 2
    if not base.startswith(("https://", "http://")):
        print(f"wasm-runner lti: --url must be an http(s) URL, got {base!r}", file=sys.stderr)
        return 2
    print(registration_text(ToolUrls.under(base), [p.name for p in config.lti.platforms]))
    return 0
