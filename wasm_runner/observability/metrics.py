"""Prometheus metrics of one app: runs by status, latency, fuel; queued, running and waiting
(parked for input) runs; sessions.

Each app has its own ``CollectorRegistry`` so several apps (tests) never collide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..result import Result

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
_FUEL_BUCKETS = tuple(10.0**e for e in range(4, 14))


class Metrics:
    """The counters, gauges and histograms the service exports at ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs = Counter(
            "wasm_runner_runs", "Guest runs finished, by status, profile and endpoint kind",
            ["status", "profile", "kind"], registry=r,
        )  # fmt: skip
        self.run_seconds = Histogram(
            "wasm_runner_run_seconds", "Wall time of guest runs (seconds), by endpoint kind",
            ["kind"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_seconds = Histogram(
            "wasm_runner_queue_wait_seconds", "Time runs waited for a slot (seconds)",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.fuel = Histogram(
            "wasm_runner_fuel_used", "Fuel (wasm instructions, roughly) used per run",
            buckets=_FUEL_BUCKETS, registry=r,
        )  # fmt: skip
        self.rejections = Counter(
            "wasm_runner_rejections", "Requests refused before running, by reason",
            ["reason"], registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge("wasm_runner_queue_depth", "Runs waiting for a slot", registry=r)
        self.running = Gauge("wasm_runner_running_guests", "Guests running now", registry=r)
        self.waiting = Gauge(
            "wasm_runner_waiting_runs",
            "Runs parked waiting for interactive input (no run slot; memory held)", registry=r,
        )  # fmt: skip
        self.memory_mb = Gauge(
            "wasm_runner_memory_reserved_mb", "Memory held by running guests and sessions (MB)",
            registry=r,
        )  # fmt: skip
        self.sessions = Gauge("wasm_runner_active_sessions", "Live sessions", registry=r)
        self.paused_sessions = Gauge(
            "wasm_runner_paused_sessions", "Sessions paused to disk (no instance held)", registry=r
        )
        self.host_calls = Counter(
            "wasm_runner_host_calls", "Host-function calls, by function and outcome",
            ["function", "outcome"], registry=r,
        )  # fmt: skip
        self.host_call_seconds = Counter(
            "wasm_runner_host_call_seconds", "Time inside host functions (seconds), by function",
            ["function"], registry=r,
        )  # fmt: skip
        self.host_call_bytes = Counter(
            "wasm_runner_host_call_bytes", "Encoded bytes of host-function calls, by function and "
            "direction (in: arguments, out: results)", ["function", "direction"], registry=r,
        )  # fmt: skip

    def watch(
        self,
        *,
        queue_depth: Callable[[], float],
        running: Callable[[], float],
        waiting: Callable[[], float],
        memory_mb: Callable[[], float],
        sessions: Callable[[], float],
        paused_sessions: Callable[[], float] = lambda: 0,
    ) -> None:
        """Read the live gauges from these functions at every scrape."""
        self.queue_depth.set_function(queue_depth)
        self.running.set_function(running)
        self.waiting.set_function(waiting)
        self.memory_mb.set_function(memory_mb)
        self.sessions.set_function(sessions)
        self.paused_sessions.set_function(paused_sessions)

    def observe(self, result: Result, profile: str, kind: str) -> None:
        self.runs.labels(result.status.value, profile, kind).inc()
        self.run_seconds.labels(kind).observe(result.wall_ms / 1000.0)
        if result.fuel_used:
            self.fuel.observe(result.fuel_used)

    def observe_host_calls(self, rows: list[dict[str, Any]]) -> None:
        """A run's host calls, as ``CallTally.rows`` counts them (names: the run's functions, or
        ``<unknown>``; never what was passed)."""
        for row in rows:
            self.host_calls.labels(row["name"], row["outcome"]).inc(row["calls"])
            self.host_call_seconds.labels(row["name"]).inc(row["ms"] / 1000.0)
            self.host_call_bytes.labels(row["name"], "in").inc(row["request_bytes"])
            self.host_call_bytes.labels(row["name"], "out").inc(row["answer_bytes"])

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type (``GET /metrics``)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
