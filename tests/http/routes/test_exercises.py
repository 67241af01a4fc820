"""/api/exercises on the shared live server (exercises_dir = tests/exercises): what a student
may see, checking through admission and the audit log, and hidden checks that never leave."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"
SECRETS = ("zebra-quartz", "secret case", "7 7 7 7", "test_secret_values", "mean([2, 4, 9])",
           "Xylophone", "hidden-name-case", "def test_", "return sum(values)")


def no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text, s


def test_list_and_public_view_hold_no_check(api: httpx.Client) -> None:
    listing = api.get("/api/exercises")
    assert listing.status_code == 200
    ids = {e["id"]: e["title"] for e in listing.json()["exercises"]}
    assert ids["mean"] == "Mean of numbers" and ids["greet"] == "Greet"
    view = api.get("/api/exercises/mean")
    assert view.status_code == 200
    body = view.json()
    assert set(body) == {"id", "title", "instructions", "starter", "checks", "limits", "browser", "hints", "style"}
    assert body["style"] is False
    assert body["instructions"].startswith("## The mean")
    assert body["starter"].startswith("def mean(values):\n    return 0")
    assert body["checks"] == 7
    no_secret(view.text)


def test_check_reference_and_wrong_code(api: httpx.Client) -> None:
    solution = (EXERCISES / "mean" / "solution.py").read_text()
    good = api.post("/api/exercises/mean/check", json={"code": solution})
    assert good.status_code == 200, good.text
    report = good.json()
    assert report["passed"] and report["total"] == 7 and report["passed_count"] == 7
    bad = api.post("/api/exercises/mean/check", json={"code": "def mean(v):\n    return 3\n"})
    assert bad.status_code == 200
    report = bad.json()
    assert not report["passed"]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["test_mean_of_two"]["message"] == "assert mean([1, 3]) == 2\n  got:      3\n  expected: 2"
    hidden = [c for c in report["checks"] if c["hidden"]]
    assert [c["name"] for c in hidden] == ["hidden check 1", "hidden check 2"]
    assert all(set(c) == {"name", "kind", "hidden", "passed", "message", "status", "limit",
                                     "weight", "fail_message"} for c in hidden)
    no_secret(bad.text)


def test_student_code_cannot_leak_hidden_inputs(api: httpx.Client) -> None:
    # the program prints its stdin and raises with it: nothing of a hidden case comes back
    leak = "import sys\nx = sys.stdin.read()\nprint('Hello, ' + x.strip() + '!')\nraise SystemExit(x)\n"
    r = api.post("/api/exercises/greet/check", json={"code": leak})
    assert r.status_code == 200
    no_secret(r.text)
    checks = r.json()["checks"]
    assert checks[0]["name"] == "Ada" and not checks[0]["passed"] and "Ada" in checks[0]["message"]
    assert checks[1] == {"name": "hidden check 1", "kind": "io", "hidden": True, "passed": False,
                         "message": "Hidden check failed.", "status": "error", "limit": None,
                         "weight": 1.0, "fail_message": None}


def test_infinite_loop_on_the_server_reports_its_limit(api: httpx.Client) -> None:
    r = api.post("/api/exercises/greet/check",
                 json={"code": "while True:\n    pass\n", "profile": "quick"})
    assert r.status_code == 200
    checks = r.json()["checks"]
    assert checks[0]["status"] in ("cpu_limit", "timeout") and checks[0]["limit"] in ("cpu", "wall")
    assert checks[1]["message"].startswith("Hidden check stopped by the")
    assert api.post("/api/run", json={"code": "print(1)"}).json()["stdout"] == "1\n"  # still serving


def test_bundle_only_for_browser_exercises(api: httpx.Client) -> None:
    b = api.get("/api/exercises/mean/bundle")
    assert b.status_code == 200
    bundle = b.json()
    assert bundle["io"][2]["hidden"] is True and "solution" not in bundle
    assert "return sum(values)" not in b.text  # never the reference solution
    server_only = api.get("/api/exercises/greet/bundle")
    assert server_only.status_code == 404 and server_only.json()["error"]["code"] == "server_only"
    no_secret(server_only.text)


def test_bad_requests_are_refused_plainly(api: httpx.Client, server) -> None:  # type: ignore[no-untyped-def]
    assert api.get("/api/exercises/nope").status_code == 404
    assert api.get("/api/exercises/nope").json()["error"]["code"] == "unknown_exercise"
    r = api.post("/api/exercises/mean/check", json={"cod": "x"})
    assert r.status_code == 422
    r = api.post("/api/exercises/mean/check", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code in (400, 422)
    r = api.post("/api/exercises/mean/check", json={"code": "print(1)", "profile": "nope"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_profile"
    with server.client(key=None) as anon:
        assert anon.get("/api/exercises/mean").status_code == 401
        assert anon.post("/api/exercises/mean/check", json={"code": "x"}).status_code == 401
    assert api.get("/healthz").status_code == 200


def test_checks_are_audited(api: httpx.Client, server) -> None:  # type: ignore[no-untyped-def]
    marker = "# audit-marker-41"
    api.post("/api/exercises/greet/check", json={"code": f"print('Hello, Ada!') {marker}"})
    lines = [json.loads(line) for line in Path(server.config.audit_log).read_text().splitlines()]
    mine = [e for e in lines if e.get("kind") == "check"]
    assert len(mine) >= 2  # one entry per check run


def test_a_named_students_check_runs_within_its_own_places(api: httpx.Client) -> None:
    # seven checks, four at once for the key, but the student may have two runs in flight: the
    # checks wait for the student's places instead of being refused by them (classroom benchmark)
    solution = (EXERCISES / "mean" / "solution.py").read_text()
    r = api.post("/api/exercises/mean/check", json={"code": solution},
                 headers={"X-Wasm-Runner-User": "student-7"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["passed"] and report["passed_count"] == report["total"] == 7
    # the same student runs code afterwards: nothing of the check is still held
    after = api.post("/api/run", json={"code": "print('next')"},
                     headers={"X-Wasm-Runner-User": "student-7"})
    assert after.status_code == 200 and after.json()["stdout"] == "next\n"


def test_style_notes_beside_the_checks_when_the_exercise_asks(api: httpx.Client) -> None:
    assert api.get("/api/exercises/tidy").json()["style"] is True
    messy = "def Add(a, b): return a + b\nl = int(input()); m = int(input())\nprint(Add(l, m))\n"
    report = api.post("/api/exercises/tidy/check", json={"code": messy})
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["passed"] is True and body["summary"].startswith("1 of 1")  # notes never change the score
    notes = body["style_notes"]
    assert {n["rule"] for n in notes} == {"N802", "E741", "E702"}
    assert all(n["kind"] == "style" and n["severity"] == "info" for n in notes)
    assert "lower case with underscores" in notes[0]["message"]
    german = api.post("/api/exercises/tidy/check", json={"code": messy, "lang": "de"}).json()["style_notes"]
    assert [(n["rule"], n["line"]) for n in german] == [(n["rule"], n["line"]) for n in notes]  # the check's lang
    assert german[0]["title"] == "Schreibweise des Funktionsnamens" and "klein, mit Unterstrichen" in german[0]["message"]
    tidy = api.post("/api/exercises/tidy/check", json={"code": "first = int(input())\nsecond = int(input())\nprint(first + second)\n"})
    assert tidy.json()["style_notes"] == []
    plain = api.post("/api/exercises/greet/check", json={"code": "name = input(); print(f'Hello, {name}!')\n"})
    assert "style_notes" not in plain.json()  # an exercise without style = true


def test_hints_used_are_counted_per_user_and_never_lowered(api: httpx.Client, server) -> None:  # type: ignore[no-untyped-def]
    import jwt

    keys = {k["kid"]: jwt.PyJWK(k) for k in httpx.get(server.url + "/.well-known/jwks.json").json()["keys"]}

    def check(hints: int, user: str | None) -> dict:  # type: ignore[type-arg]
        headers = {"X-Wasm-Runner-User": user} if user else {}
        r = api.post("/api/exercises/double/check", json={"code": "print(2)", "hints_used": hints}, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        token = body["result_token"]
        claims = jwt.decode(token, keys[jwt.get_unverified_header(token)["kid"]], algorithms=["RS256"], audience="alice")
        assert claims["hints_used"] == body["hints_used"]
        return body  # type: ignore[no-any-return]

    assert api.get("/api/exercises/double").json()["hints"][0] == "Multiply the number by 2 inside double."
    assert check(2, "hint-student")["hints_used"] == 2
    assert check(1, "hint-student")["hints_used"] == 2  # a reloaded page says 1: still 2
    assert check(10, "hint-student")["hints_used"] == 3  # bounded by the exercise's 3 hints
    assert check(0, "other-student")["hints_used"] == 0  # per user
    assert check(1, None)["hints_used"] == 1  # no user: the request's own count
    r = api.post("/api/exercises/double/check", json={"code": "print(2)", "hints_used": -1})
    assert r.status_code == 422 and "hints_used" in r.text


def test_a_failing_hidden_check_says_only_the_teachers_words(api: httpx.Client) -> None:
    # the program prints its stdin and raises with it; the hidden case (weight 3) fails
    leak = "import sys\nx = sys.stdin.read()\nprint(x)\nraise ValueError(x)\n"
    r = api.post("/api/exercises/double/check", json={"code": leak})
    assert r.status_code == 200, r.text
    for secret in ("quokka", "-41", "-82", "test_quokka_returns", "double(7)"):
        assert secret not in r.text, secret
    report = r.json()
    hidden = report["checks"][1]
    assert hidden["name"] == "hidden check 1" and hidden["weight"] == 3.0
    assert hidden["message"] == "Hidden check failed. Does your program work for negative numbers?"
    assert report["score"] == 0.0 and report["summary"] == "0 of 3 checks passed, score 0%."


def test_a_missing_function_is_explained_in_the_asked_language(api: httpx.Client) -> None:
    """Issue 36: the check's explanation in the body's lang (English without one or for a
    language without a catalogue); a malformed lang is a 422 and the server goes on answering."""
    code = "def ad(a, b):\n    return a + b\n"
    german = api.post("/api/exercises/add-missing/check", json={"code": code, "lang": "de"})
    assert german.status_code == 200, german.text
    (check,) = german.json()["checks"]
    e = check["explanation"]
    assert (e["id"], e["lang"], e["params"]["defined"]) == ("exercise_function_named_otherwise", "de", "ad")
    assert e["title"] == "Dein Code definiert add noch nicht" and "Er hat eine namens ad." in e["text"]
    for extra in ({}, {"lang": "fr"}):
        english = api.post("/api/exercises/add-missing/check", json={"code": code, **extra}).json()
        assert english["checks"][0]["explanation"]["title"] == "Your code does not define add yet"
    bad = api.post("/api/exercises/add-missing/check", json={"code": code, "lang": "no such thing"})
    assert bad.status_code == 422 and "lang" in bad.text
    assert api.get("/api/exercises").status_code == 200
