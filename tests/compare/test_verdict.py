"""Verdicts on recorded outcomes: each rule, judged from an outcome and a probe report."""

from __future__ import annotations

from wasm_runner.compare.corpus import parse_program
from wasm_runner.compare.outcome import Outcome
from wasm_runner.compare.probes import ProbeReport
from wasm_runner.compare.verdict import (
    CONTAINED,
    ESCAPED,
    MISREPORTED,
    NOT_STOPPED,
    OK,
    REFUSED,
    TIER_ERROR,
    judge,
)


def program(expect: str, stdout: str | None = None):
    extra = f"# stdout: {stdout}\n" if stdout else ""
    return parse_program(f"# category: t\n# attack: t\n# expect: {expect}\n{extra}pass\n", "t")


def recorded(d: dict) -> Outcome:
    return Outcome.from_dict(d)


CLEAN = ProbeReport()

# Outcomes recorded from real runs of the corpus (trimmed).
SUBPROCESS_EXIT_256 = {"status": "ok", "exit_code": 0, "stdout": "", "stderr": "", "wall_ms": 18.2}
WASMTIME_EXIT_256 = {"status": "error", "exit_code": 256, "wall_ms": 60.1,
                     "message": "The program exited with status 256."}
CPU_LIMIT = {"status": "cpu_limit", "exit_code": None, "wall_ms": 1890.0, "limit": "cpu"}
MEMORY_BOMB_FINISHED = {"status": "ok", "exit_code": 0, "stdout": "allocated 3072 MiB\n", "wall_ms": 2100.0}
PYODIDE_LOOP = {"status": "timeout", "limit": "wall", "wall_ms": 3004.0, "harness_killed": False}
HUNG = {"status": "timeout", "wall_ms": 18000.0, "harness_killed": True}


def test_benign_ok_needs_status_ok_and_the_expected_stdout():
    p = program("ok", "hello")
    assert judge(p, recorded({"status": "ok", "stdout": "hello\n"}), CLEAN).kind == OK
    v = judge(p, recorded({"status": "ok", "stdout": "bye\n"}), CLEAN)
    assert v.kind == REFUSED and "hello" in v.reasons[0]
    assert judge(p, recorded({"status": "error", "exit_code": 1}), CLEAN).kind == REFUSED


def test_a_tier_that_refuses_everything_does_not_look_perfect():
    refuse_all = recorded({"status": "invalid_input", "message": "refused"})
    assert judge(program("ok", "hi"), refuse_all, CLEAN).kind == REFUSED
    assert judge(program("stopped"), refuse_all, CLEAN).kind == CONTAINED


def test_stopped_means_the_tier_ended_it():
    assert judge(program("stopped"), recorded(CPU_LIMIT), CLEAN).kind == CONTAINED
    assert judge(program("stopped"), recorded(PYODIDE_LOOP), CLEAN).kind == CONTAINED
    v = judge(program("stopped"), recorded(MEMORY_BOMB_FINISHED), CLEAN)
    assert v.kind == NOT_STOPPED and "completion" in v.reasons[0]


def test_the_comparisons_watchdog_ending_a_run_is_not_containment():
    for expect in ("stopped", "failed", "harmless"):
        assert judge(program(expect), recorded(HUNG), CLEAN).kind == NOT_STOPPED


def test_failed_programs_must_not_be_reported_ok():
    assert judge(program("failed"), recorded(SUBPROCESS_EXIT_256), CLEAN).kind == MISREPORTED
    assert judge(program("failed"), recorded(WASMTIME_EXIT_256), CLEAN).kind == CONTAINED


def test_any_host_breach_is_an_escape_whatever_the_ending():
    breaches = [
        ProbeReport(canary_read=True),
        ProbeReport(canary_changed=["new pwned"]),
        ProbeReport(secret_leaked=["stdout"]),
        ProbeReport(network=["TCP connection to the host listener (5 bytes)"]),
        ProbeReport(host_writes=["/tmp/x"]),
        ProbeReport(lingering_processes=["pid 9: sleep"]),
        ProbeReport(resources=["used 250 MiB of host disk"]),
    ]
    for report in breaches:
        for expect, outcome in (("harmless", {"status": "ok"}), ("stopped", CPU_LIMIT), ("ok", {"status": "ok"})):
            v = judge(program(expect), recorded(outcome), report)
            assert v.kind == ESCAPED and v.reasons, (report, expect)


def test_internal_errors_are_the_tiers_fault():
    v = judge(program("harmless"), recorded({"status": "internal_error", "message": "runc failed"}), CLEAN)
    assert v.kind == TIER_ERROR and "runc" in v.reasons[0]


def test_probe_reports_and_outcomes_round_trip_through_json_dicts():
    r = ProbeReport(network=["x"], disk_bytes_used=5)
    assert ProbeReport.from_dict(r.to_dict()) == r
    o = recorded(CPU_LIMIT)
    assert Outcome.from_dict(o.to_dict()) == o
