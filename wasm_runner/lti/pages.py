"""The tool's pages, small and self-contained (no build step): the exercise a student launched
(code, Check, the results and whether the grade was sent), the teacher's exercise picker for Deep
Linking, the form that posts the signed deep-linking answer back to the platform, and a refusal.
Each page has its own Content-Security-Policy: scripts by nonce only, framed by the registered
platforms' origins only."""

from __future__ import annotations

import json
import secrets
from html import escape
from typing import Any

__all__ = ["auto_post_page", "csp", "exercise_page", "new_nonce", "picker_page", "refusal_page"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:1rem;max-width:60rem}
textarea{width:100%;min-height:12rem;font-family:monospace}pre{background:#f4f4f4;padding:.5rem;
white-space:pre-wrap}.ok{color:#075}.bad{color:#a00}button{font-size:1rem;padding:.3rem 1rem}"""


def csp(nonce: str, frame_origins: tuple[str, ...]) -> str:
    ancestors = " ".join(["'self'", *frame_origins])
    return (f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            f"frame-ancestors {ancestors}; base-uri 'none'; object-src 'none'; form-action *")  # fmt: skip


def _page(title: str, body: str, nonce: str, script: str = "") -> str:
    js = f"<script nonce=\"{nonce}\">{script}</script>" if script else ""
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}{js}</body></html>")  # fmt: skip


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


_EXERCISE_JS = """
const cfg = JSON.parse(document.getElementById('cfg').textContent);
const out = document.getElementById('results'), grade = document.getElementById('grade');
async function poll(id) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(cfg.statusUrl + encodeURIComponent(id), {headers: {'X-Wasm-Runner-Launch': cfg.session}});
    const s = (await r.json()).state;
    if (s === 'sent') { grade.textContent = 'Grade sent.'; grade.className = 'ok'; return; }
    if (s === 'failed') { grade.textContent = 'The course refused the grade: tell your teacher.'; grade.className = 'bad'; return; }
    await new Promise(ok => setTimeout(ok, 1000));
  }
}
const runButton = document.getElementById('run');
runButton.addEventListener('click', async () => {
  out.textContent = 'Running...'; out.className = '';
  const r = await fetch(cfg.runUrl, {method: 'POST', headers: {'Content-Type': 'application/json',
    'X-Wasm-Runner-Launch': cfg.session}, body: JSON.stringify({code: document.getElementById('code').value,
    stdin: document.getElementById('stdin').value})});
  const a = await r.json();
  if (!r.ok) { out.textContent = (a.error && a.error.message) || ('Error ' + r.status); out.className = 'bad'; return; }
  out.textContent = a.stdout + (a.stderr ? '\\n' + a.stderr : '') + (a.status === 'ok' ? '' : '\\n[' + a.status + ']');
  document.body.dataset.ran = String(Number(document.body.dataset.ran || 0) + 1);
});
const checkButton = document.getElementById('check');
if (checkButton) checkButton.addEventListener('click', async () => {
  out.textContent = 'Checking...'; grade.textContent = '';
  const r = await fetch(cfg.checkUrl, {method: 'POST', headers: {'Content-Type': 'application/json',
    'X-Wasm-Runner-Launch': cfg.session}, body: JSON.stringify({code: document.getElementById('code').value})});
  const a = await r.json();
  if (!r.ok) { out.textContent = (a.error && a.error.message) || ('Error ' + r.status); out.className = 'bad'; return; }
  out.className = a.passed ? 'ok' : 'bad';
  out.textContent = a.passed_count + ' of ' + a.total + ' checks passed\\n' +
    a.checks.map(c => (c.passed ? 'PASS ' : 'FAIL ') + c.name + (c.message ? ': ' + c.message : '')).join('\\n');
  const g = a.grade || {};
  if (g.state === 'queued') { grade.textContent = 'Grade will be sent.'; poll(g.id); }
  else if (g.state === 'kept_best') grade.textContent = 'Your best attempt counts: the grade stays.';
  else grade.textContent = 'This activity keeps no grade.';
  document.body.dataset.checked = String(Number(document.body.dataset.checked || 0) + 1);
});
"""


def exercise_page(ex: dict[str, Any], session: str, urls: dict[str, str], nonce: str) -> str:
    """An exercise (``ex``: its public part) with Run and Check, or, for ``ex`` without
    ``instructions``, a playground with Run only (``urls``: runUrl, checkUrl, statusUrl)."""
    cfg = json.dumps({"session": session, **urls}).replace("<", "\\u003c")
    check = "<button id=\"check\">Check</button> " if "checkUrl" in urls else ""
    body = (f"<h1>{escape(ex['title'])}</h1><div id=\"instructions\"><pre>{escape(ex.get('instructions', ''))}</pre></div>"
            f"<textarea id=\"code\" spellcheck=\"false\">{escape(ex['starter'])}</textarea>"
            "<p><label>Input (stdin) <input id=\"stdin\" size=\"40\"></label></p>"
            f"<p><button id=\"run\">Run</button> {check}<span id=\"grade\" role=\"status\"></span></p>"
            "<pre id=\"results\" aria-live=\"polite\"></pre>"
            f"<script type=\"application/json\" id=\"cfg\">{cfg}</script>")  # fmt: skip
    return _page(ex["title"], body, nonce, _EXERCISE_JS)


def picker_page(exercises: list[dict[str, Any]], session: str, select_url: str, nonce: str) -> str:
    rows = "".join(
        f"<li><form method=\"post\" action=\"{escape(select_url)}\">"
        f"<input type=\"hidden\" name=\"session\" value=\"{escape(session)}\">"
        f"<input type=\"hidden\" name=\"exercise\" value=\"{escape(e['id'])}\">"
        f"<button type=\"submit\" data-exercise=\"{escape(e['id'])}\">{escape(e['title'])}</button></form></li>"
        for e in exercises
    )
    playground = (f"<h2>Or a playground</h2><form method=\"post\" action=\"{escape(select_url)}\">"
                  f"<input type=\"hidden\" name=\"session\" value=\"{escape(session)}\">"
                  "<label>Title <input name=\"title\" value=\"Python playground\"></label>"
                  "<textarea name=\"starter\" placeholder=\"starter code\"></textarea>"
                  "<button type=\"submit\" name=\"playground\" value=\"1\">Add a playground</button></form>")  # fmt: skip
    return _page("Pick an exercise", f"<h1>Add an exercise to the course</h1><ul>{rows}</ul>{playground}", nonce)


def auto_post_page(url: str, fields: dict[str, str], nonce: str) -> str:
    inputs = "".join(f"<input type=\"hidden\" name=\"{escape(k)}\" value=\"{escape(v)}\">" for k, v in fields.items())
    body = (f"<form id=\"back\" method=\"post\" action=\"{escape(url)}\">{inputs}"
            "<noscript><button type=\"submit\">Continue</button></noscript></form>")  # fmt: skip
    return _page("Returning to the course", body, nonce, "document.getElementById('back').submit();")


def refusal_page(message: str, nonce: str) -> str:
    return _page("Launch refused", f"<h1>This activity cannot open</h1><p id=\"refusal\">{escape(message)}</p>", nonce)
