"""The default memory budget comes from this host's memory (or its container's limit)."""

from __future__ import annotations

from wasm_runner.host_memory import MIN_BUDGET_MB, available_memory_mb, default_memory_budget_mb
from wasm_runner.settings import ServerConfig


def test_default_budget_is_half_the_hosts_memory_shared_by_replicas() -> None:
    available = available_memory_mb()
    assert available is not None and available > 0  # Linux: /proc or sysconf answers
    one = default_memory_budget_mb()
    assert one == max(MIN_BUDGET_MB, available // 2)
    three = default_memory_budget_mb(shares=3)
    assert three == max(MIN_BUDGET_MB, available // 2 // 3) and three <= one
    assert default_memory_budget_mb(shares=10_000) == MIN_BUDGET_MB


def test_server_config_defaults_to_it_and_an_explicit_budget_wins() -> None:
    assert ServerConfig().admission.memory_budget_mb == default_memory_budget_mb()
    assert ServerConfig.from_keys(memory_budget_mb=4000).admission.memory_budget_mb == 4000
