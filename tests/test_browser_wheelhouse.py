"""End to end, offline: `wasm-runner wheelhouse` builds a wheelhouse from local wheels, the server
serves it with the rewritten lock, and Pyodide in Chromium installs and imports the package."""

from __future__ import annotations

from browser_harness import open_playground, run_in_browser, start_uvicorn, stop_process
from test_wheelhouse import make_wheel

from wasm_runner.browser.wheelhouse import main


def test_browser_imports_a_package_from_the_wheelhouse(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    make_wheel(source)  # tiny-pkg, which depends on six
    make_wheel(source, "six", "1.17.0")
    out = tmp_path / "wheelhouse"
    assert (
        main(
            [
                "tiny-pkg",
                "--find-links",
                str(source),
                "--out",
                str(out),
                "--index-url",
                "",
            ]
        )
        == 0
    )
    process, base = start_uvicorn(
        "server:app",
        {
            "WASM_RUNNER_AUTH": "off",
            "WASM_RUNNER_WHEELHOUSE": str(out),
            "WASM_RUNNER_PYODIDE_INDEX_URL": "",
        },
    )
    try:
        page = open_playground(base + "/")
        result = run_in_browser(page, "import tiny_pkg, six\nprint(tiny_pkg.VALUE)")
        assert result["status"] == "ok", result
        assert result["stdout"] == "42\n"
        # offline index: a compiled package is simply not there, with a plain Python error
        missing = run_in_browser(page, "import numpy")
        assert (
            missing["status"] == "error" and "ModuleNotFoundError" in missing["stderr"]
        )
        page.context.close()
    finally:
        stop_process(process)
