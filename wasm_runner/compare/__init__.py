"""``wasm-runner compare``: one hostile corpus, every isolation tier, safety and latency side by side."""

from .cli import main

__all__ = ["main"]
