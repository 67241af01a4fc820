"""``wasm_runner.environment``: the one reader of ``WASM_RUNNER_*`` variables (tests/test_layout.py
keeps it the only one)."""

from __future__ import annotations

from pathlib import Path

import pytest

import wasm_runner
from wasm_runner import environment
from wasm_runner.environment import PREFIX, PRESTART, VARIABLES, Variable

ROOT = Path(wasm_runner.__file__).parent


def test_every_variable_is_declared_once_and_documented() -> None:
    declared = [v for v in vars(environment).values() if isinstance(v, Variable)]
    assert sorted(v.name for v in declared) == sorted(v.name for v in VARIABLES)
    assert len({v.name for v in VARIABLES}) == len(VARIABLES)
    docs = (ROOT.parent / "docs" / "configuration.md").read_text()
    for v in VARIABLES:
        assert v.name.startswith(PREFIX)
        assert (ROOT / v.used_by).is_file(), v
        assert f"`{v.name}`" in docs, f"{v.name} is not in docs/configuration.md"


def test_a_variable_is_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRESTART.name, raising=False)
    assert (PRESTART.raw(), PRESTART.text(), PRESTART.whole(2, 8)) == (None, None, 2)
    monkeypatch.setenv(PRESTART.name, "")
    assert (PRESTART.raw(), PRESTART.text(), PRESTART.whole(2, 8)) == ("", None, 2)
    monkeypatch.setenv(PRESTART.name, " 3 ")
    assert (PRESTART.raw(), PRESTART.whole(2, 8)) == (" 3 ", 3)
    assert environment.variables()[PRESTART.name] == " 3 "
    assert all(name.startswith(PREFIX) for name in environment.variables())


def test_a_whole_number_out_of_range_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRESTART.name, "two")
    with pytest.raises(ValueError, match=r"^WASM_RUNNER_PRESTART='two' is not a whole number$"):
        PRESTART.whole(2, 8)
    monkeypatch.setenv(PRESTART.name, "9")
    with pytest.raises(ValueError, match=r"^WASM_RUNNER_PRESTART must be between 0 and 8, not 9$"):
        PRESTART.whole(2, 8)
