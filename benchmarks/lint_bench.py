"""Lint while typing (issue 36 §2): from the student's last keystroke to the marks on screen, on a
300-line file, in headless Chromium (Debian's) against the real server on 127.0.0.1.

Each round types one character at the end of a line of the file that adds a mistake (or a
Backspace that removes it) and measures, in the page: keydown -> the lint's findings ready
(``onFindings``) -> the marks in the DOM and the next animation frame. The editor waits
``delay`` ms (100) after the last change before it lints: that pause is part of the figure.
Also: the check alone (``window.playground.lint(code)``: Ruff's WebAssembly build and the wording)
on the same file, the same check against Ruff's findings alone (what our own rules, web/src/lint-own.js,
add: interleaved in the same page), and ``POST /api/lint`` for the same code (the server's ``ruff`` process).

Not a test: it only measures. Usage:
    python benchmarks/lint_bench.py [--rounds 20] [--out benchmarks/results/lint.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import httpx
from _support import pct  # first: it puts the repository on the path
from playwright.sync_api import sync_playwright

from wasm_runner.lint.own_rules import own_marks

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, READY_SECONDS, poll, start_uvicorn, stop_process

BLOCK = '''def average_{n}(values):
    """The mean of values, or None."""
    if values == None:
        return None
    total = 0
    for value in values:
        total = total + value
    return total / len(values)


'''  # 10 lines, one finding (== None)
TAIL = "print(average_0([1, 2, 3]))\n"

ARM = """() => {
  window.bench = { key: null, findings: null, dom: null, frame: null };
  const marks = () => document.querySelectorAll('.cm-lintRange').length;
  const before = marks();
  document.addEventListener("keydown", () => { window.bench.key = performance.now(); }, { capture: true, once: true });
  const seen = new MutationObserver(() => {
    if (window.bench.key !== null && window.bench.dom === null && marks() !== before) {
      window.bench.dom = performance.now();
      seen.disconnect();
      requestAnimationFrame(() => { window.bench.frame = performance.now(); });
    }
  });
  seen.observe(document.querySelector('.cm-editor'), { subtree: true, childList: true, attributes: true });
  const count = document.body.dataset.lintCount;
  const watch = setInterval(() => {
    if (document.body.dataset.lintCount !== count) { window.bench.findings = performance.now(); clearInterval(watch); }
  }, 1);
}"""

# our own rules' share (web/src/lint-own.js): the full check against Ruff's findings alone, on a
# workspace of the same bundle, interleaved in the same page
OWN_RULES_SHARE = """async (code) => {
  const url = performance.getEntriesByType("resource").map((e) => e.name).find((n) => /\\/ruff[^/]*\\.js$/.test(n));
  const { check, checkRuffOnly } = await (await import(url)).startLinter();
  const full = [], ruffOnly = [];
  for (let i = 0; i < 40; i++) {
    let t0 = performance.now(); check(code); full.push(performance.now() - t0);
    t0 = performance.now(); checkRuffOnly(code); ruffOnly.push(performance.now() - t0);
  }
  return { full, ruffOnly, ownFindings: check(code).length - checkRuffOnly(code).length };
}"""

CHECK_ALONE = """(code) => {
  const times = [];
  for (let i = 0; i < 20; i++) { const t0 = performance.now(); window.playground.lint(code); times.push(performance.now() - t0); }
  return times;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    code = "".join(BLOCK.format(n=n) for n in range(30)) + TAIL
    lines = code.count("\n")
    process, base = start_uvicorn("server:app", {"WASM_RUNNER_AUTH": "off"})
    rounds: list[dict[str, float]] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.goto(base + "/")
            poll(page, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
            page.click(".cm-content")
            page.keyboard.press("Control+a")
            page.keyboard.insert_text(code)
            poll(page, "window.playground.lint && document.body.dataset.lintCount === '30'", timeout=120)
            alone = page.evaluate(CHECK_ALONE, code)
            share = page.evaluate(OWN_RULES_SHARE, code)
            # the caret to the end of line 6 of block 0 ("        total = total + value")
            page.evaluate("""() => { const v = window.playground.editor.view; const line = v.state.doc.line(7);
                v.dispatch({ selection: { anchor: line.to } }); v.focus(); }""")
            for i in range(args.rounds):
                page.evaluate(ARM)
                page.keyboard.press("x" if i % 2 == 0 else "Backspace")  # totalx: an unknown name, then back
                poll(page, "window.bench.frame !== null && window.bench.findings !== null", timeout=10)
                b = page.evaluate("window.bench")
                rounds.append({"findings_ms": b["findings"] - b["key"], "dom_ms": b["dom"] - b["key"],
                               "frame_ms": b["frame"] - b["key"]})
                time.sleep(0.3)
            browser.close()
        own_rules_server = []  # the server's share of our own rules: ast, in this process
        for _ in range(20):
            t0 = time.perf_counter()
            own_marks(code)
            own_rules_server.append((time.perf_counter() - t0) * 1000)
        server = []
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(10):
                t0 = time.perf_counter()
                client.post("/api/lint", json={"code": code}).raise_for_status()
                server.append((time.perf_counter() - t0) * 1000)
    finally:
        stop_process(process)

    def summary(values: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(values), 1), "p95": round(pct(values, 0.95), 1),
                "max": round(max(values), 1), "n": len(values)}

    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "load_average": os.getloadavg(),
        "command": "python benchmarks/lint_bench.py --rounds %d" % args.rounds,
        "file_lines": lines,
        "debounce_ms": 100,
        "keystroke_to_findings_ms": summary([r["findings_ms"] for r in rounds]),
        "keystroke_to_marks_in_dom_ms": summary([r["dom_ms"] for r in rounds]),
        "keystroke_to_next_frame_ms": summary([r["frame_ms"] for r in rounds]),
        "browser_check_alone_ms": summary(alone),
        "browser_check_with_own_rules_ms": summary(share["full"]),
        "browser_check_ruff_only_ms": summary(share["ruffOnly"]),
        "own_rules_added_p50_ms": round(statistics.median(share["full"]) - statistics.median(share["ruffOnly"]), 2),
        "server_post_api_lint_ms": summary(server),
        "server_own_rules_ms": summary(own_rules_server),
    }
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
