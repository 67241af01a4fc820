"""The guest package's ``program`` module (wasm_runner/guest/program.py): what both tiers do around
a program, written once. Its functions on the host's Python, then the shared probes
(``tiers_alike.json``, which tests/web/tiers_alike.test.mjs runs on the browser tier) on the
server tier with the real sandbox, and the places that use it: the server's wrapper, the browser's
run helper and the host-functions loader."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from wasm_runner import Limits, Sandbox
from wasm_runner.exercises import webgen
from wasm_runner.host_functions.program import SETUP
from wasm_runner.sandbox.wrapper import BOOT_SOURCE, GUEST_MODULES, GUEST_SOURCES

ROOT = Path(__file__).resolve().parents[2]
GUEST = ROOT / "wasm_runner" / "guest"
PROBES = json.loads((Path(__file__).with_name("tiers_alike.json")).read_text())["probes"]
PLOT_STANDIN = (ROOT / "tests" / "web" / "plot_standin.py").read_text()
LIMITS = Limits(wall_seconds=30)


def _program(name: str = "program") -> Any:
    spec = importlib.util.spec_from_file_location(f"_wr_test_{name}", GUEST / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


program = _program()
rich = _program("rich")


# ---- the module on its own ------------------------------------------------------------------------
def test_compile_program_splits_off_the_last_expression_only_when_asked() -> None:
    body, tail = program.compile_program("x = 6 * 7\nx", "main.py")
    assert tail is None and body.co_filename == "main.py"
    body, tail = program.compile_program("x = 6 * 7\nx", "main.py", echo=True)
    ns: dict[str, Any] = {}
    exec(body, ns)
    assert tail is not None and tail.co_filename == "main.py" and eval(tail, ns) == 42
    assert program.compile_program("x = 1\nx += 1", "main.py", echo=True)[1] is None
    assert program.compile_program("", "main.py", echo=True)[1] is None
    with pytest.raises(SyntaxError):
        program.compile_program("x = (", "main.py", echo=True)
    # the browser's flags: top-level await in the body and in the last expression
    body, tail = program.compile_program("import asyncio\nawait asyncio.sleep(0)\nawait asyncio.sleep(0, 5)",
                                         "main.py", echo=True, flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert body.co_flags & 0x80 and tail is not None and tail.co_flags & 0x80  # CO_COROUTINE


def test_echo_is_display_true_only() -> None:
    assert [program.echoes(d) for d in (True, "figures", False, None, 1)] == [True, False, False, False, False]


def test_show_and_display_emit_one_bundle_per_value() -> None:
    """guest/rich.py on the host's Python: the last value as a "result" bundle, each display()
    argument as a "display" bundle, in the order given; None shows nothing."""
    seen: list[tuple[str, str, str]] = []

    def emit(*output: str) -> None:
        seen.append(output)  # type: ignore[arg-type]

    class Html:
        def _repr_html_(self) -> str:
            return "<b>x</b>"

        def __repr__(self) -> str:
            return "Html()"

    class Broken(Html):
        def _repr_html_(self) -> str:
            raise RuntimeError("no html")

    for value in (None, [1, "a"], Html(), Broken()):
        rich.show(value, emit)
    rich.display_function(emit)(Html(), include=["text/plain"])
    assert [(kind, mime) for kind, mime, _ in seen] == [("result", rich.BUNDLE_MIME)] * 3 + [("display", rich.BUNDLE_MIME)]
    assert [json.loads(data)["data"] for _, _, data in seen] == [
        {"text/plain": "[1, 'a']"}, {"text/html": "<b>x</b>", "text/plain": "Html()"},
        {"text/plain": "Html()"}, {"text/plain": "Html()"}]


def test_a_bundle_over_its_bound_says_so_in_text() -> None:
    seen: list[tuple[str, str, str]] = []
    rich.display_function(lambda *o: seen.append(o))({"text/html": "x" * (rich.MAX_BUNDLE_CHARS + 1)}, raw=True)
    (kind, _, data), = seen
    text = json.loads(data)["data"]
    assert list(text) == ["text/plain"] and "output too large to show" in text["text/plain"]


def test_at_end_shows_open_figures_as_display_says_and_the_turtle_always() -> None:
    def capture(emit_png: Any) -> None:
        emit_png("PNG")

    def broken(emit_png: Any) -> None:
        raise OSError("disk")

    for display, expected in ((True, ["image/png", "image/svg+xml"]), ("figures", ["image/png", "image/svg+xml"]),
                              (False, ["image/svg+xml"])):
        seen: list[tuple[str, ...]] = []
        program.at_end(display, _collect(seen), capture, lambda: "<svg/>")
        assert [o[1] for o in seen] == expected
    failed: list[tuple[str, ...]] = []
    program.at_end(True, _collect(failed), broken, lambda: None)
    assert failed == [("text", "text/plain", "figure capture failed: OSError('disk')")]


def _collect(into: list[tuple[str, ...]]) -> Any:
    return lambda *output: into.append(output)


def test_reseed_gives_random_numpy_and_tempfile_fresh_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import tempfile
    calls = []
    fake_numpy_random = types.SimpleNamespace(seed=lambda: calls.append("numpy"))
    monkeypatch.setitem(sys.modules, "numpy.random", fake_numpy_random)
    monkeypatch.setattr(tempfile, "_name_sequence", tempfile._get_candidate_names())  # type: ignore[attr-defined]
    state = random.getstate()
    try:
        random.seed(7)
        program.reseed()
        assert random.random() != random.Random(7).random()
    finally:
        random.setstate(state)
    assert calls == ["numpy"] and tempfile._name_sequence is None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy.random", types.SimpleNamespace(seed=None))  # a failing seed
    program.reseed()


def test_prepare_and_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    import linecache
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    program.prepare("prog_wr_test.py", "a = 1\nb = 2\n")
    assert sys.argv == ["prog_wr_test.py"]
    assert linecache.getline("prog_wr_test.py", 2) == "b = 2\n"
    linecache.cache.pop("prog_wr_test.py", None)
    ns = {"__name__": "__main__", "x": 1, "__x__": 2}
    program.clear(ns, {"__name__"})
    assert ns == {"__name__": "__main__"}


# ---- where it is used ----------------------------------------------------------------------------
def test_both_runners_and_the_host_functions_loader_use_it() -> None:
    """One copy: the server's wrapper ships the module in its package, the browser's worker
    installs the same source (pylib.js), and neither runner, nor the loader of a run with host
    functions, compiles the program or reseeds on its own."""
    source = (GUEST / "program.py").read_text()
    assert "program" in GUEST_MODULES and GUEST_SOURCES["program"] == source
    assert repr(source) in BOOT_SOURCE and repr(source) in webgen.guest_program()
    runner = (GUEST / "runner.py").read_text()
    browser = (GUEST / "browser.py").read_text()
    for text in (runner, browser, SETUP):
        assert "PyCF_ONLY_AST" not in text and ".seed(" not in text and "linecache.cache[" not in text
        assert "compile_program(" in text
    for text in (runner, browser):
        assert "program.reseed()" in text and "program.at_end(" in text and "rich.show(" in text
        assert "rich.install(" in text  # display() as a builtin, on both tiers


def test_the_browser_runner_is_generated_from_guest_browser_py() -> None:
    """web/src/bootstrap.py.js holds guest/browser.py and nothing written by hand; webgen writes it
    (and ``--check``, which test_browser_copy_of_the_python_is_current runs, fails when stale)."""
    bootstrap = ROOT / "web" / "src" / "bootstrap.py.js"
    assert webgen.targets()[bootstrap] == bootstrap.read_text()
    lines = bootstrap.read_text().splitlines()
    assert lines[0].startswith("// GENERATED by `python -m wasm_runner.exercises.webgen` from wasm_runner/guest/browser.py")
    assert all(line.startswith("//") for line in lines[:-1])
    assert lines[-1] == "export const BOOTSTRAP_PY = " + json.dumps((GUEST / "browser.py").read_text()) + ";"


# ---- the shared probes on the server tier ----------------------------------------------------------
def _check(result: Any, expected: dict[str, Any], where: str) -> None:
    assert result.status.value == expected["status"], (where, result.status, result.stderr)
    assert result.exit_code == expected["exit_code"], where
    assert result.stdout == expected["stdout"], where
    outputs = [[o.kind, o.mime, o.data] for o in result.outputs]
    assert len(outputs) == len(expected["outputs"]), (where, outputs)
    for got, want in zip(outputs, expected["outputs"]):
        assert got[:2] == want[:2] and (want[2] is None or got[2] == want[2]), (where, got)
    for text in expected.get("stderr_has", ()):
        assert text in result.stderr, (where, result.stderr)
    if "frames" in expected:
        assert result.stderr.count('File "') == expected["frames"], (where, result.stderr)
    if expected["status"] == "ok":
        assert result.stderr == "", (where, result.stderr)


@pytest.mark.parametrize("probe", PROBES, ids=[p["name"] for p in PROBES])
def test_the_server_tier_runs_the_shared_probes(default_sandbox: Sandbox, probe: dict[str, Any]) -> None:
    for i, run in enumerate(probe["runs"]):
        code = PLOT_STANDIN + "\n" + run["code"] if run.get("plot") else run["code"]
        result = default_sandbox.run(code, display=run["display"], filename=run["filename"], limits=LIMITS)
        _check(result, run, f"{probe['name']} (run {i + 1})")


def test_a_session_reseeds_once_and_a_fork_gets_its_own_seeds(default_sandbox: Sandbox) -> None:
    """The server's sessions (cells sharing one interpreter, like a notebook's) are seeded at their
    first cell only: a seed a cell sets holds for the next cells; a fork reseeds."""
    with default_sandbox.session(limits=LIMITS) as s:
        assert s.run("import random\nrandom.seed(7)").ok
        assert s.run("print(random.random() == random.Random(7).random())").stdout == "True\n"
        assert s.run("random.seed(7)").ok
        (copy,) = s.fork(1)
        try:
            assert copy.run("print(random.random() == random.Random(7).random())").stdout == "False\n"
        finally:
            copy.close()
