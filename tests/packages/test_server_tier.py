"""Packages beyond the image on the server tier: a wheelhouse built by the test set-up from the
package index (``tests/support/wheelhouse.py``), mounted read-only into real guests, asked for
through the Executor (every face's path), the CLI and the HTTP API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.support import mcp_checks as checks
from tests.support.live_server import KEY, live_server, make_config
from wasm_runner import Limits, Sandbox
from wasm_runner.execution import Executor, Job, OneSandbox
from wasm_runner.packages import PackageStore
from wasm_runner.result import Status

MARKDOWN = 'from markdown_it import MarkdownIt\nprint(MarkdownIt().render("# Hi *there*"), end="")\n'
WHERE = "import markdown_it, mdurl\nprint(markdown_it.__file__)\nprint(mdurl.__file__)\n"


@pytest.fixture(scope="module")
def store(package_lock: Path) -> PackageStore:
    return PackageStore.open(package_lock)


def _run(sandbox: Sandbox, store: PackageStore, code: str, packages: tuple[str, ...] = (), **kw: object):  # type: ignore[no-untyped-def]
    executor = Executor(OneSandbox(sandbox), workers=1, packages=store)
    try:
        return executor.run_sync(Job(code, packages=packages, **kw))  # type: ignore[arg-type]
    finally:
        executor.shutdown()


def test_an_import_of_an_allowed_package_runs_it_from_the_wheelhouse(image_sandbox: Sandbox, store: PackageStore) -> None:
    result = _run(image_sandbox, store, MARKDOWN)
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "<h1>Hi <em>there</em></h1>\n"
    where = _run(image_sandbox, store, WHERE)  # its dependency came along, both compiled, read-only
    assert where.stdout == ("/wasm-runner/site/markdown_it/__init__.py\n/wasm-runner/site/mdurl/__init__.py\n")


def test_a_fresh_instance_gets_the_packages_too_and_a_run_without_them_does_not(store: PackageStore) -> None:
    sandbox = Sandbox(prestart=0)  # no warm slot: the packages' folder is granted at the start
    try:
        result = _run(sandbox, store, "# requires: markdown-it-py\n" + MARKDOWN + "1/0\n", filename="main.py")
        assert result.status == Status.ERROR
        assert result.stdout == "<h1>Hi <em>there</em></h1>\n"
        assert result.stderr.startswith('Traceback (most recent call last):\n  File "main.py", line 4')
        bare = sandbox.run("import markdown_it")  # no packages asked: nothing mounted
        assert "ModuleNotFoundError: No module named 'markdown_it'" in bare.stderr
    finally:
        sandbox.close()


def test_the_packages_are_read_only_and_the_last_expression_still_shows(default_sandbox: Sandbox, store: PackageStore) -> None:
    code = ("import markdown_it\ntry:\n    open(markdown_it.__file__, 'a').write('x = 1')\n"
            "except OSError as e:\n    print(type(e).__name__)\nmarkdown_it.__name__\n")
    result = _run(default_sandbox, store, code, display=True)
    assert result.status == Status.OK, result.stderr
    assert result.stdout.strip() in ("PermissionError", "OSError")
    (shown,) = result.outputs  # the last expression, one MIME bundle (guest/rich.py)
    assert json.loads(shown.data)["data"]["text/plain"] == "'markdown_it'"
    again = _run(default_sandbox, store, MARKDOWN)  # the cached copy is unchanged
    assert again.stdout == "<h1>Hi <em>there</em></h1>\n"


def test_sympy_asked_by_name_comes_from_the_image_and_a_disallowed_package_gets_its_sentence(
    default_sandbox: Sandbox, store: PackageStore
) -> None:
    sympy = _run(default_sandbox, store, "import sympy\nx = sympy.Symbol('x')\nprint(sympy.integrate(x**2, x))",
                 packages=("sympy",))
    assert sympy.status == Status.OK and sympy.stdout == "x**3/3\n", sympy.stderr
    refused = _run(default_sandbox, store, "import leftpad", packages=("leftpad",))
    assert refused.status == Status.INVALID_INPUT
    assert refused.message == (
        "The package leftpad is not allowed on this server (server tier and browser tier alike): the operator's "
        "wheelhouse has certifi, charset-normalizer, idna, markdown-it-py, mdurl, mpmath, requests, sympy, urllib3. "
        "Ask the operator to add it to the package lock.")
    requires = _run(default_sandbox, store, "# requires: leftpad\nprint(1)")
    assert requires.status == Status.INVALID_INPUT and "The package leftpad is not allowed" in requires.message
    assert _run(default_sandbox, store, "print('still here')").stdout == "still here\n"


def test_the_cli_and_the_http_api_take_packages(package_lock: Path, tmp_path: Path) -> None:
    env = {**os.environ, "WASM_RUNNER_PACKAGES_LOCK": str(package_lock)}
    cli = subprocess.run([str(Path(sys.executable).with_name("wasm-runner")), "run", "--package", "markdown-it-py",
                          "-c", MARKDOWN], capture_output=True, text=True, env=env, timeout=300)
    assert (cli.returncode, cli.stdout) == (0, "<h1>Hi <em>there</em></h1>\n"), cli.stderr
    with live_server(make_config(tmp_path, packages_lock=package_lock)) as server, server.client(KEY) as api:
        ok = api.post("/api/run", json={"code": MARKDOWN, "packages": ["markdown-it-py"]}).json()
        assert ok["status"] == "ok" and ok["stdout"] == "<h1>Hi <em>there</em></h1>\n", ok
        refused = api.post("/api/run", json={"code": "print(1)", "packages": ["leftpad"]}).json()
        assert refused["status"] == "invalid_input" and "The package leftpad is not allowed" in refused["message"]
        assert api.post("/api/run", json={"code": "print(2)"}).json()["stdout"] == "2\n"
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [a["packages"] for a in audit] == [["markdown-it-py==4.2.0", "mdurl==0.1.2"], [], []]
    assert [a["status"] for a in audit] == ["ok", "invalid_input", "ok"]


def test_the_mcp_tool_takes_packages(package_lock: Path, tmp_path: Path) -> None:
    keep = ("PATH", "HOME", "LANG", "XDG_CACHE_HOME", "WASM_RUNNER_CACHE", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(TMPDIR=str(tmp_path), WASM_RUNNER_PACKAGES_LOCK=str(package_lock))
    server = StdioServerParameters(command=str(Path(sys.executable).with_name("wasm-runner")),
                                   args=["mcp", "--wall-seconds", "120"], env=env)

    async def conversation() -> None:
        async with Client(server, read_timeout_seconds=300) as client:
            ok = await checks.call(client, "run_python", {"code": MARKDOWN, "packages": ["markdown-it-py"]})
            assert not ok.is_error and "<h1>Hi <em>there</em></h1>" in checks.text_of(ok), checks.text_of(ok)
            refused = await checks.call(client, "run_python", {"code": "print(1)", "packages": ["leftpad"]})
            assert "The package leftpad is not allowed on this server" in checks.text_of(refused)
            opened = await checks.call(client, "open_session", {"packages": ["markdown-it-py"]})
            assert not opened.is_error, checks.text_of(opened)
            cell = await checks.call(client, "run_cell", {"session_id": opened.structured_content["session_id"],
                                                          "code": MARKDOWN})
            assert "<h1>Hi <em>there</em></h1>" in checks.text_of(cell), checks.text_of(cell)

    checks.run_async(conversation)


def test_a_session_cell_naming_a_package_no_tier_has_is_refused_and_the_session_goes_on(api: Any) -> None:
    sid = api.post("/api/sessions", json={}).json()["id"]  # a server without a wheelhouse
    refused = api.post(f"/api/sessions/{sid}/run", json={"code": "x = 1", "packages": ["leftpad"]}).json()
    assert refused["status"] == "invalid_input" and refused["message"] == (
        "The package leftpad is not allowed on this server (server tier and browser tier alike): the operator's "
        "wheelhouse has none. Ask the operator to add it to the package lock."), refused
    assert api.post(f"/api/sessions/{sid}/run", json={"code": "print(2 + 2)"}).json()["stdout"] == "4\n"
    api.delete(f"/api/sessions/{sid}")


def test_a_run_with_packages_reaches_the_network_its_rule_allows(default_sandbox: Sandbox, store: PackageStore) -> None:
    from tests.support.loopback_api import loopback_api
    from wasm_runner.network import NetworkRule, RunNetwork

    with loopback_api() as api:
        rule = NetworkRule.from_table("test-api", {"destinations": [f"http://127.0.0.1:{api.port}"]})
        code = ("import json, urllib.request\nfrom markdown_it import MarkdownIt\n"
                f"data = json.load(urllib.request.urlopen('http://127.0.0.1:{api.port}/data.json'))\n"
                "print(MarkdownIt().render(f\"**{data['answer']}**\"), end='')\n")
        result = default_sandbox.run(code, packages=store.folders_for(code), network=RunNetwork([rule]),
                                     limits=Limits(wall_seconds=60))
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "<p><strong>42</strong></p>\n"


def test_the_refusal_names_the_tier_that_has_the_package_and_each_tiers_modules_are_served(api: Any) -> None:
    served = api.get("/tier-modules.json")
    assert served.status_code == 200 and served.headers["access-control-allow-origin"] == "*"
    assert "max-age" in served.headers["cache-control"]
    tiers = served.json()
    # the server's image has numpy; the browser's index (Pyodide's stock lock) has click, the image does not
    assert "numpy" in tiers["server"] and "click" in tiers["browser"] and "click" not in tiers["server"]
    assert "leftpad" not in tiers["server"] + tiers["browser"] and tiers["lock"] == []
    browser_only = api.post("/api/run", json={"code": "print(1)", "packages": ["click"]}).json()
    assert (browser_only["status"], browser_only["message"]) == (
        "invalid_input", "click is not on the server tier; it is on the browser tier: run there, or choose auto.")
    nowhere = api.post("/api/run", json={"code": "# requires: leftpad, click\nprint(1)"}).json()
    assert nowhere["message"] == (
        "The package leftpad is not allowed on this server (server tier and browser tier alike): the operator's "
        "wheelhouse has none. Ask the operator to add it to the package lock. click is on the browser tier only.")
    assert api.post("/api/run", json={"code": "print(2)"}).json()["stdout"] == "2\n"
