"""Each tier adapter's contract, on the real tier: a benign program runs, a hostile one is held,
and the host probes (checked from outside) agree. The contract tests run on every tier this machine
has; a tier it cannot run is checked to say why (as `wasm-runner compare` reports it), and the three
the project ships with must be available.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from wasm_runner.compare.corpus import load_corpus
from wasm_runner.compare.runner import COMPARE_LIMITS, run_cell
from wasm_runner.compare.tiers.base import Tier
from wasm_runner.compare.tiers.bwrap_tier import BubblewrapTier
from wasm_runner.compare.tiers.firecracker_tier import FirecrackerTier
from wasm_runner.compare.tiers.microvm_tier import QemuMicrovmTier
from wasm_runner.compare.tiers.oci_tier import OciTier
from wasm_runner.compare.tiers.pyodide_chromium_tier import PyodideChromiumTier
from wasm_runner.compare.tiers.pyodide_node_tier import PyodideNodeTier
from wasm_runner.compare.tiers.subprocess_tier import SubprocessTier
from wasm_runner.compare.tiers.wasmtime_tier import WasmtimeTier
from wasm_runner.compare.verdict import CONTAINED, ESCAPED, OK

MUST_HAVE = {"subprocess", "wasmtime", "pyodide-node"}
FACTORIES = {
    "subprocess": SubprocessTier,
    "bwrap": BubblewrapTier,
    "runc": lambda: OciTier("runc"),
    "crun": lambda: OciTier("crun"),
    "gvisor": lambda: OciTier("runsc"),
    "qemu-microvm": QemuMicrovmTier,
    "firecracker": FirecrackerTier,
    "wasmtime": WasmtimeTier,
    "pyodide-node": PyodideNodeTier,
    "pyodide-chromium": PyodideChromiumTier,
}
PROGRAMS = {p.id: p for p in load_corpus()}
# A benign program is checked to run and print, not to fit the comparison's tight CPU second: in a
# microVM under TCG the guest's CPU clock follows the host's wall clock, so on a busy host a program
# that needs 0.3 s is charged seconds (seen: "CPU limit of 1.0 s reached" at load 10).
BENIGN_LIMITS = replace(COMPARE_LIMITS, cpu_seconds=20.0, wall_seconds=40.0)


def _availability() -> dict[str, tuple[bool, str]]:
    return {name: make().available() for name, make in FACTORIES.items()}


AVAILABLE = _availability()


def test_required_tiers_are_available_and_the_others_say_why():
    for name in MUST_HAVE:
        ok, why = AVAILABLE[name]
        assert ok, f"{name} must be available in CI: {why}"
    for name, (ok, why) in AVAILABLE.items():
        if not ok:
            assert why and len(why) > 10, f"{name} is unavailable without a reason"


@pytest.fixture(scope="module", params=sorted(n for n, (ok, _) in AVAILABLE.items() if ok))
def tier(request) -> Tier:
    t = FACTORIES[request.param]()
    t.prepare()
    yield t
    t.cleanup()


def test_benign_program_runs_and_prints(tier):
    cell = run_cell(tier, PROGRAMS["benign_compute"], BENIGN_LIMITS)
    assert cell.verdict.kind == OK, (cell.verdict, cell.outcome)
    assert "primes below 20000: 2262" in cell.outcome.stdout
    assert cell.probes.breaches() == []


def test_cpu_loop_is_stopped_by_the_tier_and_the_host_is_untouched(tier):
    cell = run_cell(tier, PROGRAMS["cpu_loop_swallow"], COMPARE_LIMITS)
    assert cell.verdict.kind == CONTAINED, (cell.verdict, cell.outcome)
    assert not cell.outcome.ok and not cell.outcome.harness_killed
    assert cell.outcome.limit in ("cpu", "wall")
    if any(c.startswith("RLIMIT_CPU not enforced") for c in tier.caveats):
        assert cell.outcome.limit == "wall"  # what prepare measured and the row says (gVisor here)
    assert cell.probes.breaches() == []


def test_output_flood_is_capped(tier):
    cell = run_cell(tier, PROGRAMS["output_flood_stdout"], COMPARE_LIMITS)
    assert cell.verdict.kind == CONTAINED, (cell.verdict, cell.outcome)
    assert len(cell.outcome.stdout.encode()) <= COMPARE_LIMITS.stdout_bytes


# The native subprocess shares the host's network: its connection always arrives. Pyodide under Node
# maps Python sockets onto emscripten's WebSocket layer, which connects from Node's event loop only
# when Python yields, so whether the connection lands before the worker ends is a race; there the
# test checks that the verdict follows what the listener saw. Every other tier must show no traffic.
def test_network_to_the_host_is_measured_not_assumed(tier):
    cell = run_cell(tier, PROGRAMS["net_tcp_connect"], COMPARE_LIMITS)
    if tier.name == "subprocess":
        assert cell.verdict.kind == ESCAPED
        assert any("TCP" in n for n in cell.probes.network)
    elif tier.name == "pyodide-node":
        assert (cell.verdict.kind == ESCAPED) == bool(cell.probes.network)
        assert cell.verdict.kind in (ESCAPED, CONTAINED)
    else:
        assert cell.verdict.kind == CONTAINED, (cell.verdict, cell.outcome)
        assert cell.probes.network == []


def test_host_file_read_through_symlink_is_caught_or_held(tier):
    cell = run_cell(tier, PROGRAMS["escape_symlink"], COMPARE_LIMITS)
    if tier.name == "subprocess":
        assert cell.probes.canary_read and cell.verdict.kind == ESCAPED
    else:
        assert cell.verdict.kind == CONTAINED, (cell.verdict, cell.outcome)
        assert not cell.probes.canary_read and cell.probes.canary_changed == []


def test_gvisor_row_names_its_platform_and_the_firecracker_row_says_why():
    ok, detail = AVAILABLE["gvisor"]
    if ok:
        assert re.search(r"platform (ptrace|systrap) \(", detail), detail
    else:
        assert "runsc" in detail
    ok, detail = AVAILABLE["firecracker"]
    if "not on PATH" in detail:
        assert not ok and "no package registry ships a firecracker binary" in detail
    if "PVM" in QemuMicrovmTier().available()[1]:
        assert not ok and "PVM" in detail  # the same reason the microVM tier runs on TCG here
