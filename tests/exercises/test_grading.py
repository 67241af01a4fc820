"""Grading (issue 35 §3, issue 36 §3): weights make the score the weighted share of the checks
passed; a teacher's ``fail_message`` is what a student sees of a failing hidden check, and
nothing else of that check; hints load in order. Real server-tier runs (wasmtime), and the
browser tier's generated practice program judging the same runs the same way."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wasm_runner import Limits
from wasm_runner.exercises import ExerciseError, check_code, load_exercise, practice, redact
from tests.support.redis_process import RedisProcess
from wasm_runner.exercises.hint_counts import HintCounts
from wasm_runner.exercises.webgen import practice_program
from wasm_runner.scaleout.state import SharedState

EXERCISES = Path(__file__).resolve().parent
DOUBLE = load_exercise(EXERCISES / "double.toml")
QUICK = Limits(cpu_seconds=1, wall_seconds=4, memory_mb=256)
# passes "two" (weight 1) and the hidden test (weight 0), fails the hidden negative case (weight 3)
ABS = "def double(n):\n    return abs(2 * n)\n\nprint(double(int(input())))\n"
SECRETS = ("quokka", "-41", "-82", "test_quokka_returns", "double(7)")


def test_the_score_is_the_weighted_share() -> None:
    assert DOUBLE.check_weights() == [1.0, 3.0, 0.0]
    report = check_code(DOUBLE, ABS, limits=QUICK)
    assert [c["passed"] for c in report["checks"]] == [True, False, True]
    assert report["score"] == 0.25 and report["passed_count"] == 2 and report["total"] == 3
    assert report["summary"] == "2 of 3 checks passed, score 25%."
    full = check_code(DOUBLE, DOUBLE.solution or "", limits=QUICK)
    assert full["score"] == 1.0 and full["summary"] == "3 of 3 checks passed, score 100% — well done!"
    none = check_code(DOUBLE, DOUBLE.starter, limits=QUICK)
    assert none["score"] == 0.0 and none["passed_count"] == 0


def test_a_failing_hidden_check_says_the_teachers_words_and_nothing_else() -> None:
    shown = redact(check_code(DOUBLE, ABS, limits=QUICK))
    negative = shown["checks"][1]
    assert negative["name"] == "hidden check 1" and not negative["passed"]
    assert negative["message"] == "Hidden check failed. Does your program work for negative numbers?"
    text = json.dumps(shown)
    for secret in SECRETS:
        assert secret not in text, secret
    # a passing hidden check says nothing of its message
    assert shown["checks"][2]["message"] == "Hidden check passed." and shown["checks"][2]["fail_message"] is None
    # the student's program printing its input and failing: still only the teacher's words
    leak = "import sys\nx = sys.stdin.read()\nprint(x)\nraise ValueError(x)\n"
    text = json.dumps(redact(check_code(DOUBLE, leak, limits=QUICK)))
    for secret in SECRETS:
        assert secret not in text, secret
    assert "double must return a number, not print it." in text


def test_a_visible_check_says_the_teachers_words_before_the_details(tmp_path: Path) -> None:
    toml = tmp_path / "shout.toml"
    toml.write_text('title = "Shout"\n[[io]]\nstdin = "hi\\n"\nstdout = "HI\\n"\n'
                    "fail_message = 'Use str.upper().'\n")
    check = check_code(load_exercise(toml), "print(input())\n", limits=QUICK)["checks"][0]
    assert check["message"].startswith("Use str.upper().\nInput:\n    hi\nExpected output:")


def test_the_browser_tier_judges_weights_and_messages_as_the_server() -> None:
    runs = practice.plan(DOUBLE.bundle(), ABS)
    assert [(r["weight"], r["fail_message"]) for r in runs] == [
        (1.0, None), (3.0, "Does your program work for negative numbers?"),
        (0.0, "double must return a number, not print it.")]
    ok = {"status": "ok", "limit": None, "message": "", "stderr": "", "outputs": []}
    checks: list[dict] = []  # type: ignore[type-arg]
    said: dict = {}  # type: ignore[type-arg]
    for run, stdout in ((runs[0], "4\n"), (runs[1], "82\n")):
        request = {"op": "judge", "exercise": "double", "run": run,
                   "result": {**ok, "stdout": stdout}, "checks": checks}
        said = json.loads(subprocess.run([sys.executable, "-c", practice_program()],
                                         input=json.dumps(request), capture_output=True, text=True,
                                         timeout=60, check=True).stdout)
        checks = [*checks, said["check"]]
    assert said["report"]["score"] == 0.25 and said["report"]["summary"] == "1 of 2 checks passed, score 25%."
    assert said["check"]["fail_message"] == "Does your program work for negative numbers?"


def test_hints_load_in_order_and_reach_the_public_view() -> None:
    assert DOUBLE.hints[0] == "Multiply the number by 2 inside double." and len(DOUBLE.hints) == 3
    assert DOUBLE.public()["hints"] == list(DOUBLE.hints) and DOUBLE.bundle()["hints"] == list(DOUBLE.hints)


@pytest.mark.parametrize("toml, error", [
    ("[[io]]\nstdout = '1'\nweight = -1\n", "weight must be a number from 0 to 1000"),
    ("[[io]]\nstdout = '1'\nweight = true\n", "weight must be a number"),
    ("[[io]]\nstdout = '1'\nweight = 0\n", "weights add up to 0"),
    ("[[io]]\nstdout = '1'\nfail_message = '  '\n", "fail_message must be 1 to 2000 characters"),
    ("[[io]]\nstdout = '1'\nfail_message = 3\n", "fail_message must be text"),
    ("hints = 'use a loop'\n[[io]]\nstdout = '1'\n", "hints must be a list"),
    ("hints = ['ok', '']\n[[io]]\nstdout = '1'\n", "hint 2 must be 1 to 2000 characters"),
    ("[[tests]]\nsource = 'assert True'\nweight = 'heavy'\n", "weight must be a number"),
    ("grade = 'first'\n[[io]]\nstdout = '1'\n", 'grade must be "best" (the best attempt counts) or "latest"'),
    ("grade = true\n[[io]]\nstdout = '1'\n", "not True"),
])
def test_bad_weights_messages_and_hints_are_refused_plainly(tmp_path: Path, toml: str, error: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("title = 'x'\n" + toml)
    with pytest.raises(ExerciseError) as info:
        load_exercise(path)
    assert error in str(info.value) and "bad" in str(info.value)


def test_hint_counts_per_user_never_lowered_in_memory_and_in_redis(redis_server: RedisProcess) -> None:
    async def counts(hints: HintCounts) -> list[int]:
        return [await hints.record("course", "u1", "double", 2, 3),
                await hints.record("course", "u1", "double", 1, 3),   # a reloaded page: still 2
                await hints.record("course", "u1", "double", 9, 3),   # bounded by the 3 hints
                await hints.record("course", "u2", "double", 0, 3),   # another user
                await hints.record("course", "u1", "mean", 1, 3),     # another exercise
                await hints.record("other", "u1", "double", 1, 3),    # another key
                await hints.record("course", None, "double", 2, 3),   # no user: the request's own
                await hints.record("course", None, "double", -4, 3)]

    async def in_redis() -> list[int]:
        shared = SharedState(redis_server.url, secret="s" * 32, key_prefix=f"hints-test-{time.time_ns()}:")
        await shared.start()
        try:
            return await counts(HintCounts(shared))
        finally:
            await shared.close()

    expected = [2, 2, 3, 0, 1, 1, 2, 0]
    assert asyncio.run(counts(HintCounts())) == expected
    assert asyncio.run(in_redis()) == expected
