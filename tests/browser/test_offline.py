"""End to end, with no internet: a course site serves the playground from `wasm-runner serve` on
127.0.0.1 after `wasm-runner wheelhouse` imported the release's packages, and headless Chromium
(every request not to 127.0.0.1 aborted, so there is no CDN) imports them in the browser tier.

The release is a stand-in shaped like the official one (test_wheelhouse.make_release): its numpy
is a tiny pure-Python package that prints a marker, py-compiled here with `pyodide py-compile`.
The package index stays the default (the official CDN), so a package not in the wheelhouse shows
the message naming the index that could not be reached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.support.browser import READY_SECONDS, REPO, poll, run_in_browser, run_via_ui, shared_browser, start_serve
from tests.support.browser import stop_process as stop
from tests.browser.test_wheelhouse import NUMPY_FILE, make_archive, make_release, make_wheel

from wasm_runner.browser.locations import OFFICIAL_INDEX_TEMPLATE, web_dir
from wasm_runner.browser.release import declared_pyodide_version

WASM_RUNNER = [str(Path(sys.executable).with_name("wasm-runner"))]


def _cli(*argv: str) -> None:
    completed = subprocess.run([*WASM_RUNNER, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Any:
    tmp = tmp_path_factory.mktemp("offline")
    archive = make_archive(make_release(tmp / "release"), tmp / f"pyodide-{declared_pyodide_version(web_dir())}.tar.bz2")
    wheelhouse = tmp / "wheelhouse"
    _cli("wheelhouse", "--from-release", str(archive), "numpy", "--py-compile", "--out", str(wheelhouse))
    source = tmp / "source"
    source.mkdir()
    make_wheel(source)  # tiny-pkg, which depends on six
    make_wheel(source, "six", "1.17.0")
    tampered = make_wheel(source, "tampered_pkg", "1.0", requires=())
    _cli("wheelhouse", "tiny-pkg", "tampered-pkg", "--find-links", str(source), "--out", str(wheelhouse))
    with (wheelhouse / tampered.name).open("ab") as wheel:
        wheel.write(b"changed after the import")  # the server must not serve it
    env = {k: v for k, v in os.environ.items() if k != "WASM_RUNNER_PYODIDE_INDEX_URL"}  # the default index
    env["WASM_RUNNER_WHEELHOUSE"] = str(wheelhouse)
    process, base = start_serve(env)
    context = shared_browser().new_context()
    requests: dict[str, list[str]] = {"served": [], "aborted": []}

    def only_loopback(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).hostname == "127.0.0.1":
            requests["served"].append(url)
            route.continue_()
        else:
            requests["aborted"].append(url)
            route.abort("internetdisconnected")

    context.route("**/*", only_loopback)
    page = context.new_page()
    page.goto(base + "/")
    poll(page, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
    yield {"page": page, "base": base, "requests": requests, "tampered": tampered.name}
    context.close()
    stop(process)


def test_numpy_from_the_release_imports_in_the_browser_with_no_internet(site):
    result = run_in_browser(site["page"], "import numpy\nprint(numpy.__stand_in__)\nprint(numpy.__file__)")
    assert result["status"] == "ok", result
    marker, where = result["stdout"].splitlines()
    assert marker == "numpy stand-in: offline ok"
    assert where.endswith("numpy/__init__.pyc")  # the py-compiled wheel
    served = [u for u in site["requests"]["served"] if NUMPY_FILE in u]
    assert served and all(u.startswith(site["base"] + "/pyodide/") for u in served)
    assert not any("numpy" in u for u in site["requests"]["aborted"])


def test_a_pure_wheel_from_the_wheelhouse_imports(site):
    result = run_in_browser(site["page"], "import tiny_pkg, six\nprint(tiny_pkg.VALUE)")
    assert result["status"] == "ok", result
    assert result["stdout"] == "42\n"


def test_a_package_not_in_the_wheelhouse_names_the_index_it_tried(site):
    index = OFFICIAL_INDEX_TEMPLATE.format(version=declared_pyodide_version(web_dir()))
    seen = run_via_ui(site["page"], "import pandas", "browser")
    missing = seen["result"]["missing"]
    assert missing["package"] == "pandas" and missing["reason"] == "unreachable" and missing["index"] == index
    assert f"the browser's package index ({index}) could not be reached" in seen["note"]
    assert any(u.startswith(index) for u in site["requests"]["aborted"])  # it tried the CDN, and was cut off


def test_a_wheel_changed_after_the_import_is_not_served(site):
    with urllib.request.urlopen(site["base"] + "/sandbox", timeout=5) as frame:
        pyodide_base = re.search(r"/pyodide/[^/\"]+/", frame.read().decode()).group(0)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(site["base"] + pyodide_base + site["tampered"], timeout=5)
    assert refused.value.code == 404
    with urllib.request.urlopen(site["base"] + pyodide_base + "pyodide-lock.json", timeout=5) as served:
        packages = json.load(served)["packages"]
    local = {"numpy", "standin-helper", "tiny-pkg", "six"}
    assert all("://" not in packages[name]["file_name"] for name in local)  # served from here
    assert "tampered-pkg" not in packages and "pandas" in packages  # pandas: from the official index
    with urllib.request.urlopen(site["base"] + pyodide_base + NUMPY_FILE, timeout=5) as good:
        assert good.status == 200
    result = run_in_browser(site["page"], "import tampered_pkg")
    assert result["status"] == "error" and result["missing"]["reason"] == "not_listed"
    again = run_in_browser(site["page"], "import numpy\nprint(numpy.__stand_in__)")  # the server still answers
    assert again["stdout"] == "numpy stand-in: offline ok\n"
