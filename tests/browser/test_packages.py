"""Packages beyond the image on the browser tier: the operator's lock (the test set-up's, from the
package index: tests/support/wheelhouse.py) becomes the browser's wheelhouse (`wasm-runner
wheelhouse --from-lock`), served by `wasm-runner serve` on 127.0.0.1, and headless Chromium (every
request not to 127.0.0.1 aborted) imports the same packages the server tier mounts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.support.browser import READY_SECONDS, REPO, poll, run_in_browser, run_via_ui, shared_browser, start_serve
from tests.support.browser import stop_process as stop

WASM_RUNNER = str(Path(sys.executable).with_name("wasm-runner"))
# markdown_it imported where the host's reading of imports cannot see it: packages= alone asks
MARKDOWN_BY_NAME = "import importlib\nprint(importlib.import_module('markdown' + '_it').MarkdownIt().render('by name'), end='')"


@pytest.fixture(scope="module")
def page(package_lock: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    wheelhouse = tmp_path_factory.mktemp("browser-packages") / "wheelhouse"
    built = subprocess.run([WASM_RUNNER, "wheelhouse", "--from-lock", str(package_lock), "--out", str(wheelhouse)],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    process, base = start_serve({**os.environ, "WASM_RUNNER_WHEELHOUSE": str(wheelhouse),
                                 "WASM_RUNNER_PYODIDE_INDEX_URL": "", "WASM_RUNNER_PACKAGES_LOCK": str(package_lock)})
    context = shared_browser().new_context()
    context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname == "127.0.0.1"
                  else route.abort("internetdisconnected"))
    tab = context.new_page()
    tab.goto(base + "/")
    poll(tab, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
    yield tab
    context.close()
    stop(process)


def test_the_locked_packages_import_in_the_browser_as_on_the_server(page: Any) -> None:
    markdown = run_in_browser(page, 'from markdown_it import MarkdownIt\nprint(MarkdownIt().render("# Hi *there*"), end="")')
    assert markdown["status"] == "ok", markdown
    assert markdown["stdout"] == "<h1>Hi <em>there</em></h1>\n"  # what the server tier prints
    sympy = run_in_browser(page, "import sympy\nx = sympy.Symbol('x')\nprint(sympy.integrate(x**2, x), sympy.__version__)",
                           limits={"wall_seconds": 120})  # sympy's first import in Pyodide on a busy machine
    assert sympy["status"] == "ok", sympy
    assert sympy["stdout"] == "x**3/3 1.14.0\n"  # the lock's version, from the wheelhouse


NO_TIER = ("The package leftpad is not allowed on this server (server tier and browser tier alike): the operator's "
           "wheelhouse has certifi, charset-normalizer, idna, markdown-it-py, mdurl, mpmath, requests, sympy, urllib3. "
           "Ask the operator to add it to the package lock.")


def test_an_import_no_tier_has_or_only_the_server_has_gets_the_server_tiers_sentence(page: Any) -> None:
    missing = run_in_browser(page, "import leftpad")  # offline index: only the wheelhouse is listed
    assert missing["status"] == "error"
    assert missing["stderr"].endswith("ModuleNotFoundError: No module named 'leftpad'\n"), missing
    assert missing["missing"]["sentence"] == NO_TIER, missing
    # the browser's index has no numpy; the server's image has it (the page learns so from /tier-modules.json)
    numpy = run_in_browser(page, "import numpy")
    assert numpy["missing"]["sentence"] == "numpy is not on the browser tier; it is on the server tier: run there, or choose auto."
    assert numpy["missing"]["tier"] == "server", numpy
    by_name = run_in_browser(page, "print('never')", packages=["numpy"])
    assert (by_name["status"], by_name["stdout"]) == ("invalid_input", ""), by_name
    assert by_name["message"] == numpy["missing"]["sentence"]
    both = run_in_browser(page, "print('never')", packages=["numpy", "leftpad"])
    assert both["message"] == NO_TIER + " numpy is on the server tier only.", both
    # what the student sees: the sentence under the end line, and the offer to run it on the server
    seen = run_via_ui(page, "import numpy", "browser")
    assert seen["note"].startswith(numpy["missing"]["sentence"]) and "Run it on the server" in seen["note"], seen
    assert "Run it on the server" not in run_via_ui(page, "import leftpad", "browser")["note"]
    assert run_in_browser(page, "print('still here')")["stdout"] == "still here\n"


def test_packages_by_name_on_both_tiers_and_the_refusal_sentence(page: Any) -> None:
    # not an import the worker can see: only packages=["sympy"] installs it
    code = "import importlib\nprint(importlib.import_module('sym' + 'py').__version__)"
    browser = run_in_browser(page, code, packages=["sympy"], limits={"wall_seconds": 120})
    assert (browser["status"], browser["stdout"]) == ("ok", "1.14.0\n"), browser
    server = run_in_browser(page, MARKDOWN_BY_NAME, tier="server", packages=["markdown-it-py"])
    assert (server["status"], server["tier"], server["stdout"]) == ("ok", "server", "<p>by name</p>\n"), server
    for tier in ("browser", "server"):  # one sentence, whichever tier refuses
        refused = run_in_browser(page, "# requires: leftpad\nprint('never')", tier=tier)
        assert (refused["status"], refused["stdout"], refused["message"]) == ("invalid_input", "", NO_TIER), refused


def test_auto_runs_where_the_programs_packages_are(page: Any) -> None:
    # the browser's index (offline: the wheelhouse alone) has no numpy; the server's image has it
    result = run_in_browser(page, "# requires: numpy\nimport numpy\nprint(numpy.arange(3).sum())", tier="auto")
    assert (result["status"], result["tier"], result["stdout"]) == ("ok", "server", "3\n"), result
    here = run_in_browser(page, "# requires: mdurl\nimport mdurl\nprint(mdurl.__name__)", tier="auto")
    assert (here["tier"], here["stdout"]) == ("browser", "mdurl\n"), here  # the browser has it: it stays there
