"""The hostile corpus: every file parses, covers the attack families, and renders its bait."""

from __future__ import annotations

import pytest

from wasm_runner.compare.corpus import (
    EXPECTATIONS,
    CorpusError,
    load_corpus,
    parse_program,
)
from wasm_runner.compare.probes import HostProbes

REQUIRED_CATEGORIES = {"benign", "cpu", "wall", "memory", "processes", "files", "secrets", "network",
                       "disk", "output", "exit", "ctypes", "source"}


def test_every_corpus_file_parses_with_a_known_expectation():
    programs = load_corpus()
    assert len(programs) >= 40
    assert {p.expect for p in programs} <= set(EXPECTATIONS)
    assert REQUIRED_CATEGORIES <= {p.category for p in programs}
    assert sum(p.benign for p in programs) >= 4


def test_benign_programs_state_their_expected_output():
    for p in load_corpus(only=["benign"]):
        assert p.expect == "ok" and p.stdout, p.id


def test_placeholders_render_to_the_probes_bait(tmp_path):
    probes = HostProbes(str(tmp_path))  # its own folder to measure, not the whole temp folder
    probes.start()
    try:
        values = probes.placeholders()
        for p in load_corpus():
            source = p.render(values)
            assert "@@" not in source, p.id
        source = next(p for p in load_corpus() if p.id == "net_tcp_connect").render(values)
        assert values["TCP_PORT"] in source
        assert probes.secret not in "".join(p.render(values) for p in load_corpus())
    finally:
        probes.close()


def test_repeat_body_builds_a_huge_source_from_a_small_file():
    huge = next(p for p in load_corpus() if p.id == "source_huge")
    assert len(huge.body) < 100
    assert len(huge.render({})) > 2_000_000


def test_nul_placeholder_becomes_a_nul_character():
    p = next(p for p in load_corpus() if p.id == "source_nul_byte")
    assert "\0" in p.render({})


@pytest.mark.parametrize(
    "text, message",
    [
        ("print(1)\n", "expect"),
        ("# category: cpu\n# attack: x\n# expect: maybe\npass\n", "expect"),
        ("# category: cpu\n# expect: ok\npass\n", "attack"),
        ("# category: cpu\n# attack: x\n# expect: stopped\n# limit: fuel\npass\n", "limit"),
        ("# category: cpu\n# attack: x\n# expect: ok\n# repeat-body: lots\npass\n", "repeat-body"),
    ],
)
def test_bad_headers_are_refused_with_the_file_named(text, message):
    with pytest.raises(CorpusError, match=message) as info:
        parse_program(text, "broken_file")
    assert "broken_file" in str(info.value)


def test_unknown_placeholder_and_unknown_selection_are_clear_errors(tmp_path):
    p = parse_program("# category: x\n# attack: y\n# expect: ok\nprint('@@NOPE@@')\n", "f")
    with pytest.raises(CorpusError, match="NOPE"):
        p.render({})
    with pytest.raises(CorpusError, match="no corpus program"):
        load_corpus(only=["no_such_attack"])
    with pytest.raises(CorpusError, match="not found"):
        load_corpus(tmp_path / "missing")
