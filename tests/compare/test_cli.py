"""``wasm-runner compare`` end to end: the real command on every tier this machine has."""

from __future__ import annotations

import json
import subprocess
import sys

from wasm_runner.compare.tiers import all_tiers

PROGRAMS = ["benign_hello", "net_tcp_connect", "cpu_loop_python", "write_outside_scratch"]


def compare(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wasm_runner.cli", "compare", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_list_names_every_tier_and_says_why_one_is_missing():
    proc = compare("--list")
    assert proc.returncode == 0, proc.stderr
    for tier in all_tiers():
        assert tier.name in proc.stdout
    assert "not available here" in proc.stdout  # Docker has no daemon on CI machines


def test_compare_runs_the_corpus_on_every_available_tier(tmp_path):
    out_json, out_chart = tmp_path / "compare.json", tmp_path / "compare.svg"
    args = ["--latency-runs", "2", "--throughput-runs", "2", "--json", str(out_json), "--chart", str(out_chart)]
    for p in PROGRAMS:
        args += ["--program", p]
    proc = compare(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    tiers = {t["name"]: t for t in doc["tiers"]}
    assert set(tiers) == {t.name for t in all_tiers()}
    ran = {name for name, t in tiers.items() if t["available"]}
    assert {"subprocess", "wasmtime", "pyodide-node"} <= ran
    for name, t in tiers.items():
        if not t["available"]:
            assert t["detail"] and f"{name}: not available here: {t['detail']}" in proc.stdout
            continue
        assert t["error"] == "", (name, t["error"])
        verdicts = {c["program"]: c["verdict"]["kind"] for c in t["cells"]}
        assert set(verdicts) == set(PROGRAMS)
        assert verdicts["benign_hello"] == "ok", name
        assert verdicts["cpu_loop_python"] == "contained", name
        assert t["startup_ms"]["runs"] == 2 and t["startup_ms"]["p50"] > 0
        assert t["throughput_rps"] and t["throughput_rps"] > 0
    # measured in this run: the native subprocess reaches the host, wasmtime does not
    sub = {c["program"]: c for c in tiers["subprocess"]["cells"]}
    assert sub["net_tcp_connect"]["verdict"]["kind"] == "escaped"
    assert sub["write_outside_scratch"]["probes"]["host_writes"]
    wasm = {c["program"]: c for c in tiers["wasmtime"]["cells"]}
    assert all(c["verdict"]["kind"] in ("ok", "contained") for c in wasm.values())
    # the table shows the same verdicts, and the chart is a real SVG
    table_row = next(line for line in proc.stdout.splitlines() if line.startswith("net_tcp_connect"))
    assert "ESCAPED" in table_row and "held" in table_row
    assert out_chart.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_bad_arguments_are_clear_errors():
    proc = compare("--tier", "nonsense")
    assert proc.returncode == 2 and "unknown tier" in proc.stderr and "subprocess" in proc.stderr
    proc = compare("--program", "no_such_attack", "--tier", "subprocess")
    assert proc.returncode == 2 and "no corpus program" in proc.stderr
    proc = compare("--chart", "out.gif")
    assert proc.returncode == 2 and ".png or .svg" in proc.stderr
    proc = compare("--latency-runs", "-1")
    assert proc.returncode == 2 and "between 0 and 1000" in proc.stderr
