"""Limits: defaults, ranges, and tightening by a request."""

from __future__ import annotations

import pytest

from wasm_runner import InvalidLimits, Limits
from wasm_runner.limits import limit_ranges


def test_defaults_are_valid() -> None:
    assert Limits().validate() == Limits()


@pytest.mark.parametrize(
    "bad",
    [{"cpu_seconds": 0}, {"wall_seconds": 1e9}, {"memory_mb": 1.5}, {"stdout_bytes": -1},
     {"disk_mb": float("inf")}, {"max_files": True}, {"cpu_seconds": "1"}],
)
def test_out_of_range_is_refused_with_the_name(bad: dict) -> None:
    with pytest.raises(InvalidLimits) as e:
        Limits(**bad).validate()
    assert next(iter(bad)) in str(e.value)


def test_unknown_names_are_refused() -> None:
    with pytest.raises(InvalidLimits, match="unknown limit"):
        Limits.from_dict({"gpu": 1})


def test_a_request_may_tighten_never_loosen() -> None:
    profile = Limits(cpu_seconds=2, memory_mb=64)
    assert profile.tightened({"cpu_seconds": 1}).cpu_seconds == 1
    assert profile.tightened(None) is profile
    with pytest.raises(InvalidLimits, match="may only tighten"):
        profile.tightened({"memory_mb": 128})


def test_ranges_are_documented() -> None:
    r = limit_ranges()
    assert set(r) == {"cpu_seconds", "wall_seconds", "memory_mb", "stdout_bytes", "stderr_bytes", "disk_mb", "max_files", "input_wait_seconds", "host_calls", "host_call_bytes", "host_seconds"}
    assert all(v["minimum"] <= v["maximum"] for v in r.values())
