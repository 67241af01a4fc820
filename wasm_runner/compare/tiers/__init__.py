"""Isolation tiers for ``wasm-runner compare``, weakest isolation first."""

from __future__ import annotations

from .base import Tier


def all_tiers() -> list[Tier]:
    """Every tier this project knows, each detected on use (``available()``)."""
    from .bwrap_tier import BubblewrapTier
    from .firecracker_tier import FirecrackerTier
    from .microvm_tier import QemuMicrovmTier
    from .oci_tier import OciTier
    from .pyodide_chromium_tier import PyodideChromiumTier
    from .pyodide_node_tier import PyodideNodeTier
    from .subprocess_tier import SubprocessTier
    from .docker_tier import DockerTier
    from .wasmtime_tier import WasmtimeTier

    return [
        SubprocessTier(),
        BubblewrapTier(),
        OciTier("crun"),
        OciTier("runc"),
        DockerTier(),
        OciTier("runsc"),
        QemuMicrovmTier(),
        FirecrackerTier(),
        WasmtimeTier("default"),
        PyodideNodeTier(),
        PyodideChromiumTier(),
    ]


__all__ = ["Tier", "all_tiers"]
