"""``python -m wasm_runner.compare``: the same as ``wasm-runner compare``."""

import sys

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
