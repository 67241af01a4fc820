"""``POST /api/lint`` (``wasm_runner/http/routes/lint.py``) on a live server: the beginner findings in plain words (the same as the
browser's, tests/lint and tests/browser/test_lint.py), the style notes, auth, a rate limit that
holds while the server still answers, bounded input, and the OpenAPI description."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import KEY, LiveServer, live_server, make_config

from wasm_runner.settings import ApiKey, hash_key

CORPUS = Path(__file__).resolve().parents[2] / "lint" / "corpus"
THRIFTY_KEY = "thrifty-key"


def test_findings_in_plain_words(api: httpx.Client) -> None:
    answer = api.post("/api/lint", json={"code": (CORPUS / "misspelt_name.py").read_text()})
    assert answer.status_code == 200, answer.text
    findings = answer.json()["findings"]
    assert [(f["rule"], f["line"], f["column"], f["end_column"], f["severity"]) for f in findings] == [
        ("F821", 4, 13, 17, "error"), ("F841", 6, 5, 11, "warning"), ("F821", 7, 12, 17, "error")]
    assert findings[0]["message"] == (
        "Python does not know `nmae` here. Check its spelling, or give it a value before this line.")
    assert findings[0]["detail"] == "Undefined name `nmae`" and findings[0]["kind"] == "beginner"


def test_findings_in_the_language_asked(api: httpx.Client) -> None:
    code = (CORPUS / "misspelt_name.py").read_text()
    english = api.post("/api/lint", json={"code": code}).json()["findings"]
    german = api.post("/api/lint", json={"code": code, "lang": "de-CH"}).json()["findings"]
    assert [(f["rule"], f["line"], f["detail"]) for f in german] == [(f["rule"], f["line"], f["detail"]) for f in english]
    assert german[0]["title"] == "Unbekannter Name"
    assert german[0]["message"] == (
        "Python kennt `nmae` hier nicht. Prüfe die Schreibweise, oder gib dem Namen vor dieser Zeile einen Wert.")
    assert german[1]["title"] == "Wert nie benutzt"
    assert api.post("/api/lint", json={"code": code, "lang": "fr"}).json()["findings"] == english  # none: English
    refused = api.post("/api/lint", json={"code": code, "lang": "not a language"})
    assert refused.status_code == 422 and "lang" in refused.text


def test_syntax_errors_style_notes_and_clean_code(api: httpx.Client) -> None:
    broken = api.post("/api/lint", json={"code": (CORPUS / "missing_colon.py").read_text()}).json()["findings"]
    assert [(f["rule"], f["line"], f["title"]) for f in broken] == [("syntax", 2, "Python cannot read this")]
    assert broken[0]["message"].startswith("Expected `:`, found newline. Check for a missing `:`")
    code = (CORPUS / "style_notes.py").read_text()
    assert api.post("/api/lint", json={"code": code}).json()["findings"] == []
    styled = api.post("/api/lint", json={"code": code, "style": True}).json()["findings"]
    assert {f["rule"] for f in styled} == {"N802", "N806", "E702", "E741", "E703", "E701", "W291", "E501"}
    assert all(f["kind"] == "style" and f["severity"] == "info" for f in styled)
    assert api.post("/api/lint", json={"code": ""}).json() == {"findings": []}


def test_bounded_input_and_clear_refusals(api: httpx.Client, server: LiveServer) -> None:
    too_big = api.post("/api/lint", json={"code": "x = 1\n" * 50_000})
    assert too_big.status_code == 422 and too_big.json()["error"]["code"] == "invalid_request"
    assert "at most 262144" in too_big.json()["error"]["message"]
    wrong = api.post("/api/lint", json={"code": 5})
    assert wrong.status_code == 422
    extra = api.post("/api/lint", json={"code": "x = 1", "select": ["ALL"]})  # no rule choice from outside
    assert extra.status_code == 422
    with server.client(None) as anonymous:
        assert anonymous.post("/api/lint", json={"code": "x = 1"}).status_code == 401
    assert api.post("/api/lint", json={"code": "print(1)"}).status_code == 200  # still answers


def test_openapi_describes_lint(api: httpx.Client) -> None:
    doc = api.get("/api/openapi.json").json()
    assert doc["paths"]["/api/lint"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/LintRequest"}
    assert set(doc["components"]["schemas"]["LintRequest"]["properties"]) == {"code", "style", "lang"}


@pytest.fixture(scope="module")
def thrifty(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    keys = (ApiKey("alice", hash_key(KEY), rate="10000/minute"), ApiKey("thrifty", hash_key(THRIFTY_KEY), rate="3/minute"))
    with live_server(make_config(tmp_path_factory.mktemp("lint-rate"), api_keys=keys)) as live:
        yield live


def test_rate_limit_holds_and_the_server_still_answers(thrifty: LiveServer) -> None:
    with thrifty.client(THRIFTY_KEY) as client:
        codes = [client.post("/api/lint", json={"code": "print(x)"}).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        refused = client.post("/api/lint", json={"code": "print(x)"})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    with thrifty.client(KEY) as other:  # another key is not affected
        answer = other.post("/api/lint", json={"code": "print(x)"})
        assert answer.status_code == 200 and answer.json()["findings"][0]["rule"] == "F821"
