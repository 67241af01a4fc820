"""Rich outputs in the playground, in real headless Chromium against the real server: a pandas
DataFrame shown as an HTML table, a formula typeset by KaTeX (from our own origin), a user's
_repr_html_ sanitised (no script runs, no handler stays), on the server tier; the same bundles
rendered alike on the browser tier (user classes: Pyodide here has no pandas). The screenshot
is tests' evidence: SCREENSHOTS/playground-rich-outputs.png."""

from __future__ import annotations

from tests.browser.test_playground import SCREENSHOTS
from tests.support.browser import open_playground, poll, run_via_ui

CLASSES = r'''
class Fraction:
    def _repr_latex_(self):
        return r"$$\frac{a + b}{2} = \sqrt{x^2 + 1}$$"

    def __repr__(self):
        return "Fraction()"

class Sneaky:
    def _repr_html_(self):
        return ("<p class='made'>made by the program</p><img src=x onerror='window.pwned = 1'>"
                "<script>window.pwned = 2</script><style>body { display: none }</style>")

display(Fraction())
display(Sneaky())
'''
TABLE = '''
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima", "Accra"], "temp": [3.5, 19.0, 27.25]})
display(df)
'''
SHOWN = """() => ({
  tables: [...document.querySelectorAll('#output .out-html table')].map((t) => t.innerText),
  math: document.querySelectorAll('#output .out-latex .katex').length,
  katexFont: getComputedStyle(document.querySelector('#output .out-latex .katex') || document.body).fontFamily,
  made: [...document.querySelectorAll('#output .out-html p.made')].map((p) => p.textContent),
  handlers: document.querySelectorAll('#output [onerror], #output script, #output style').length,
  pwned: window.pwned === undefined ? null : window.pwned,
})"""


def test_the_playground_shows_a_table_and_a_formula_on_the_server_tier() -> None:
    page = open_playground("/")
    seen = run_via_ui(page, TABLE + CLASSES, "server")
    assert seen["status"] == "ok", seen
    shown = poll(page, f"(() => {{ const s = ({SHOWN})(); return s.tables.length && s.math ? s : null; }})()")
    assert "Oslo" in shown["tables"][0] and "27.25" in shown["tables"][0]
    assert shown["math"] == 1 and "KaTeX" in shown["katexFont"]
    assert shown["made"] == ["made by the program"]
    assert shown["handlers"] == 0 and shown["pwned"] is None
    assert page.is_visible("#output")
    page.locator("#output").screenshot(path=str(SCREENSHOTS / "playground-rich-outputs.png"))
    assert page.errors == []
    page.context.close()


def test_the_browser_tier_renders_the_same_bundles() -> None:
    page = open_playground("/")
    seen = run_via_ui(page, CLASSES + "display({'text/html': '<table><tr><td>cell</td></tr></table>'}, raw=True)\n",
                      "browser")
    assert seen["status"] == "ok", seen
    shown = poll(page, f"(() => {{ const s = ({SHOWN})(); return s.tables.length && s.math ? s : null; }})()")
    assert shown["tables"] == ["cell"] and shown["math"] == 1 and shown["made"] == ["made by the program"]
    assert shown["handlers"] == 0 and shown["pwned"] is None
    assert page.errors == []
    page.context.close()
