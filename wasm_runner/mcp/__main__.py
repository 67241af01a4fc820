"""``python -m wasm_runner.mcp``: the same as ``wasm-runner mcp``."""

import sys

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
