"""``python -m wasm_runner.mcp``: the same as ``wasm-runner mcp``."""

import sys

from .cli import main

sys.exit(main())
