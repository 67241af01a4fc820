"""Explanations in the HTTP API (issue 36): the result's ``explanation`` field, in the asked
``lang``, for an error and for a limit; a bad ``lang`` is refused; the server still answers."""

from __future__ import annotations

import httpx
import jsonschema

from wasm_runner.result import RESULT_JSON_SCHEMA


def test_an_error_is_explained_in_the_asked_language(api: httpx.Client) -> None:
    code = "fruits = ['apple', 'pear']\nfor i in range(3):\n    print(fruits[i])\n"
    body = api.post("/api/run", json={"code": code, "filename": "main.py", "lang": "de-AT"}).json()
    jsonschema.validate(body, RESULT_JSON_SCHEMA)
    e = body["explanation"]
    assert body["status"] == "error" and e["id"] == "index_out_of_range" and e["lang"] == "de"
    assert e["title"] == "Position 2 liegt hinter dem Ende von fruits"
    assert e["text"].startswith("fruits hat 2 Elemente, an den Positionen 0 bis 1.")
    assert e["span"] == {"line": 3, "col": 10, "end_col": 19}
    english = api.post("/api/run", json={"code": code}).json()["explanation"]
    assert english["lang"] == "en" and english["title"] == "Position 2 is past the end of fruits"


def test_a_limit_is_explained_and_ok_has_none(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": "n = 1\nwhile n > 0:\n    n + 1\n", "limits": {"cpu_seconds": 0.3}}).json()
    assert r["status"] == "cpu_limit" and r["explanation"]["id"] == "limit_cpu"
    assert "your loop's condition never becomes false" in r["explanation"]["text"]
    assert r["explanation"]["span"] is None
    assert api.post("/api/run", json={"code": "print(1)"}).json()["explanation"] is None


def test_a_bad_lang_is_refused(api: httpx.Client) -> None:
    r = api.post("/api/run", json={"code": "pass", "lang": "de; drop"})
    assert r.status_code == 422
    assert api.post("/api/run", json={"code": "1/0", "lang": "xx"}).json()["explanation"]["lang"] == "en"
