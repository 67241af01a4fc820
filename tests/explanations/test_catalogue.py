"""The explanations' message catalogues and the host's side: every id the guest or the host can
give has a title, text and hint in every language; the host passes on only what it checked."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from wasm_runner.explanations import LANGUAGES, checked, for_limit, language_of, render
from wasm_runner.explanations.catalogue import catalogue, fill, parse_po
from wasm_runner.limits import Limits
from wasm_runner.tiers import end_line

REPO = Path(__file__).resolve().parents[2]
GUEST = REPO / "wasm_runner" / "guest" / "explain.py"
PARAM = r"(?<!\{)\{([a-z_]+(?::[a-z]+)?)\}"  # {name} or {name:kind}, with its kind


def guest_ids() -> set[str]:
    """The ids guest/explain.py returns (its ``return "id", ...`` lines)."""
    source = GUEST.read_text()
    ids = set(re.findall(r'return \(?"([a-z_]+)"', source))
    ids |= {i for pair in re.findall(r'return \("([a-z_]+)" if .* else "([a-z_]+)"\)', source) for i in pair}
    ids |= set(re.findall(r'\("(unpack_too_many)" if .* else "(unpack_too_few)"\)', source)[0])
    return ids


def test_every_id_has_every_field_in_every_language() -> None:
    ids = guest_ids() | {"limit_timeout", "limit_cpu", "limit_memory", "limit_output", "limit_input_wait",
                         "limit_disk", "exercise_missing_function",
                         "exercise_function_named_otherwise"}
    assert len(ids) >= 60
    english = catalogue("en")
    for lang in LANGUAGES:
        entries = catalogue(lang)
        missing = [f"{i}.{f}" for i in ids for f in ("title", "text", "hint") if not entries.get(f"{i}.{f}")]
        assert not missing, (lang, missing)
        assert set(entries) == set(english), lang  # no entry of one language lacks in another
        for key, template in entries.items():  # same parameters as the English text
            assert set(re.findall(PARAM, template)) <= set(re.findall(PARAM, english[key]) + ["name"]), (lang, key)


def test_po_reader_and_placeholders() -> None:
    po = 'msgid ""\nmsgstr "Language: de\\n"\n\n# a comment\nmsgid "a.title"\nmsgstr "Say \\"hi\\" "\n"to {name}"\n'
    assert parse_po(po) == {"a.title": 'Say "hi" to {name}'}
    with pytest.raises(ValueError):
        parse_po("nonsense line")
    assert fill("f\"{{{name}}}\" and {{ }} {missing}!", {"name": "age"}) == 'f"{age}" and { } !'


def test_language_chosen_from_a_tag() -> None:
    assert language_of("de-AT") == "de" and language_of("de_CH") == "de" and language_of("DE") == "de"
    assert language_of("fr") == "en" and language_of(None) == "en" and language_of("C.UTF-8") == "en"


def test_the_host_passes_on_only_a_checked_explanation() -> None:
    assert checked({"id": "no_such_id", "params": {}, "span": None}) is None
    assert checked("name_misspelt") is None
    raw = checked({"id": "name_misspelt", "params": {"name": "x" * 1000, "close": ["a"], "n": True, "bad key": "v",
                                                      "first": "total"},
                   "span": {"line": 0, "col": 1, "end_col": 2}})
    assert raw is not None
    assert raw["params"] == {"name": "x" * 200, "first": "total"} and raw["span"] is None
    assert checked({"id": "zero_division", "span": {"line": 3, "col": 5, "end_col": 2}})["span"] is None  # type: ignore[index]
    ok = checked({"id": "zero_division", "params": {}, "span": {"line": 3, "col": 2, "end_col": 5}})
    assert ok is not None and ok["span"] == {"line": 3, "col": 2, "end_col": 5}


def test_limits_are_explained() -> None:
    limits = Limits(cpu_seconds=2, wall_seconds=4.5, memory_mb=128).to_dict()
    timeout = render(for_limit("timeout", "wall", limits), "en")  # type: ignore[arg-type]
    assert timeout["text"] == ("It was stopped after 4.5 seconds. Most often a loop never ends: your loop's "
                               "condition never becomes false.")
    cpu = render(for_limit("cpu_limit", "cpu", limits), "de")  # type: ignore[arg-type]
    assert "Rechenzeit hat 2 Sekunden überschritten" in cpu["text"]
    assert for_limit("memory_limit", "memory", limits)["params"] == {"megabytes": 128}  # type: ignore[index]
    assert for_limit("ok", None, limits) is None and for_limit("error", None, limits) is None


def test_a_limit_without_a_value_is_named_as_the_end_line_names_it() -> None:
    """A run whose limits lack the one that stopped it: "the time limit", never "0 seconds"."""
    raws = [for_limit("timeout", "wall", {}), for_limit("cpu_limit", "cpu", {"cpu_seconds": None}),
            for_limit("memory_limit", "memory", {}), for_limit("output_limit", "output", {})]
    assert all(raw is not None and raw["params"] == {} for raw in raws)
    english = [render(raw, "en")["text"] for raw in raws]  # type: ignore[arg-type]
    assert english[0].startswith("It was stopped after the time limit.")
    assert "the time limit" in end_line("timeout", {}, limit="wall")
    assert english[1].startswith("Its computing time went past the time limit.")
    assert "more memory than the allowed amount" in english[2] and "more than the limit" in english[3]
    assert not any(re.search(r"\b0 (seconds|MB|bytes)", text) for text in english)
    german = [render(raw, "de")["text"] for raw in raws]  # type: ignore[arg-type]
    assert german[0].startswith("Es wurde gestoppt, als es länger als das Zeitlimit lief.")
    for lang, texts in (("en", english), ("de", german)):  # the page's renderer says the same
        assert [r["text"] for r in _browser_render(raws, lang)] == texts  # type: ignore[arg-type]


# a limit's status, its limit, the limits it ran under, and the quantity its end line says
QUANTITIES = [
    ("output_limit", "output", {"stdout_bytes": 1 << 20}, "1 MB"),
    ("output_limit", "output", {"stdout_bytes": 64 << 10}, "64 KB"),
    ("output_limit", "output", {"stdout_bytes": 1000}, "1000 bytes"),
    ("timeout", "wall", {"wall_seconds": 120}, "2 minutes"),
    ("timeout", "wall", {"wall_seconds": 4.5}, "4.5 seconds"),
    ("cpu_limit", "cpu", {"cpu_seconds": 1}, "1 second"),
    ("cpu_limit", "cpu", {"cpu_seconds": 0.5}, "0.5 seconds"),
    ("memory_limit", "memory", {"memory_mb": 512}, "512 MB"),
    ("timeout", "input_wait", {"input_wait_seconds": 300}, "5 minutes"),
]


def _browser_render(raws: list[dict[str, object]], lang: str) -> list[dict[str, object]]:
    """The page's renderer (web/src/explain.js) on ``raws``, under Node."""
    script = ("import { renderExplanation } from './web/src/explain.js';\n"
              "import { readFileSync } from 'node:fs';\n"
              "const raws = JSON.parse(readFileSync(0, 'utf8'));\n"
              f"process.stdout.write(JSON.stringify(raws.map((r) => renderExplanation(r, {lang!r}))));\n")
    done = subprocess.run(["node", "--input-type=module", "-e", script], cwd=REPO, input=json.dumps(raws),
                          capture_output=True, text=True, timeout=60, check=True)
    rendered: list[dict[str, object]] = json.loads(done.stdout)
    return rendered


def test_a_limit_says_its_quantity_as_the_end_line_does_on_both_renderers() -> None:
    raws = []
    for status, limit, values, said in QUANTITIES:
        line = end_line(status, values, limit=limit)
        assert said in line, (line, said)  # what the run's status says ...
        raw = for_limit(status, limit, values)
        assert raw is not None
        text = render(raw, "en")["text"]
        assert said in text, (text, said)  # ... its explanation says too
        raws.append(raw)
    assert "1048576" not in render(raws[0], "en")["text"]
    for lang in LANGUAGES:  # the page words every quantity as the server does
        assert _browser_render(raws, lang) == [render(raw, lang) for raw in raws]
    german = [render(raw, "de")["text"] for raw in raws]
    assert "mehr als 1 MB" in german[0] and "1000 Bytes" in german[2] and "2 Minuten" in german[3]
    assert "Rechenzeit hat 1 Sekunde überschritten" in german[5] and "länger als 5 Minuten auf" in german[8]
    assert fill("{n:bytes} and {n:weeks} and {gone:seconds}", {"n": 2048}) == "2048 and 2048 and "
    assert fill("{n:bytes}", {"n": 2048}, catalogue("en")) == "2 KB"
