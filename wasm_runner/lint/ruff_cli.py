"""The server's lint: the ``ruff`` command on the code from stdin, with ``--isolated`` (no
configuration file is looked for or read), no cache, the table's rules and a time limit."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from typing import Any

from ..errors import WasmRunnerError
from .own_rules import merge_own_findings
from .rules import Finding, lint_language, rule_table

__all__ = ["DEFAULT_TIMEOUT", "MAX_LINT_BYTES", "LintFailed", "lint_source", "ruff_binary", "ruff_command"]

DEFAULT_TIMEOUT = 10.0  # seconds for one file; Ruff takes milliseconds
MAX_LINT_BYTES = 256 * 1024  # of UTF-8 source: far more than a student's file


class LintFailed(WasmRunnerError, RuntimeError):
    """Lint could not run: too large, not text, Ruff missing, too slow or broken."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@cache
def ruff_binary() -> str:
    try:
        from ruff.__main__ import find_ruff_bin  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - ruff is a declared dependency
        raise LintFailed("lint_unavailable", "the ruff package is not installed (pip install ruff)") from exc
    return str(find_ruff_bin())


def ruff_command(style: bool = False) -> list[str]:
    table = rule_table()
    return [
        ruff_binary(), "check", "--isolated", "--no-cache", "--exit-zero", "--quiet",
        "--output-format", "json", "--target-version", table.target_version,
        "--line-length", str(table.line_length), "--select", ",".join(table.codes(style)),
        "--stdin-filename", "main.py", "-",
    ]


def lint_source(code: str, *, style: bool = False, lang: str | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> list[Finding]:
    """The findings for ``code`` (Ruff's and our own rules'), in source order, worded by the shared
    table in ``lang`` (``lint_language``: English when the table lacks it)."""
    language = lint_language(lang)
    data = code.encode("utf-8", "surrogatepass")
    if len(data) > MAX_LINT_BYTES:
        raise LintFailed("too_large", f"the code is {len(data)} bytes; lint takes at most {MAX_LINT_BYTES}")
    # a clean environment: no RUFF_* variable changes what runs
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    try:
        done = subprocess.run(ruff_command(style), input=data, capture_output=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise LintFailed("lint_timeout", f"lint took longer than {timeout:g} s and was stopped") from exc
    except OSError as exc:
        raise LintFailed("lint_unavailable", f"ruff could not start: {exc}") from exc
    if done.returncode != 0:
        raise LintFailed("lint_failed", "ruff failed: " + done.stderr.decode(errors="replace").strip()[:500])
    return merge_own_findings(code, findings_from(json.loads(done.stdout or b"[]"), language), language)


def findings_from(diagnostics: list[dict[str, Any]], lang: str = "en") -> list[Finding]:
    table = rule_table()
    found: list[Finding] = []
    for item in diagnostics:
        rule = table.by_name(item.get("code") or item.get("name") or "invalid-syntax")
        if rule is None:
            continue
        start, end = item["location"], item["end_location"]
        found.append(Finding(
            rule=rule.code, name=rule.name, kind=rule.kind, severity=rule.severity, title=rule.title_in(lang),
            message=rule.message(item["message"], lang), detail=item["message"],
            line=start["row"], column=start["column"], end_line=end["row"], end_column=end["column"],
        ))
    found.sort(key=lambda f: (f["line"], f["column"], f["rule"]))
    return found
