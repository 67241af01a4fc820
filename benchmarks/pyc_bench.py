"""What `wasm-runner wheelhouse --py-compile` buys: import time of pure-Python wheels in Pyodide,
as shipped (.py, compiled on import) and py-compiled (.pyc made by `pyodide py-compile`).

Builds both wheelhouses from the same wheels, then, in Node, for each load starts a fresh Pyodide
(the browser tier's npm package), installs the wheels from disk and times the import in Python
(time.perf_counter around the import; the install from disk is timed too). Prints the median of --loads loads per variant.

    .venv/bin/python benchmarks/pyc_bench.py                       # rich==13.9.4 from PyPI
    .venv/bin/python benchmarks/pyc_bench.py --find-links DIR      # offline
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wasm_runner.browser.locations import web_dir  # noqa: E402
from wasm_runner.browser.wheelhouse import build_wheelhouse, read_manifest  # noqa: E402

NODE_SCRIPT = r"""
import { pathToFileURL } from "node:url";
const [pyodideDir, payload] = process.argv.slice(2);
const { variants, loads, code } = JSON.parse(payload);
const { loadPyodide } = await import(pathToFileURL(pyodideDir + "/pyodide.mjs").href);
const out = {};
for (const [name, wheels] of Object.entries(variants)) {
  out[name] = [];
  for (let i = 0; i < loads; i++) {
    const pyodide = await loadPyodide({ indexURL: pyodideDir + "/" });
    const t0 = performance.now();
    await pyodide.loadPackage(wheels, { messageCallback: () => {} });
    const install = performance.now() - t0;
    const ms = pyodide.runPython(`import time\nt0 = time.perf_counter()\n${code}\n(time.perf_counter() - t0) * 1000`);
    out[name].push([install, ms]);
  }
}
console.log(JSON.stringify(out));
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", default="rich==13.9.4")
    parser.add_argument("--find-links", type=Path, default=None)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--code", default="import rich.console, rich.table, rich.markdown, rich.syntax")
    args = parser.parse_args(argv)
    web = web_dir()
    with tempfile.TemporaryDirectory() as tmp:
        variants: dict[str, list[str]] = {}
        sizes: dict[str, int] = {}
        for name, compile_pyc in (("source", False), ("pyc", True)):
            out = Path(tmp) / name
            build_wheelhouse([args.requirement], out, find_links=args.find_links, compile_pyc=compile_pyc)
            files = [str(out / e["file_name"]) for e in read_manifest(out).values()]
            variants[name] = files
            sizes[name] = sum(Path(f).stat().st_size for f in files)
        script = Path(tmp) / "bench.mjs"
        script.write_text(NODE_SCRIPT)
        node = shutil.which("node") or "node"
        payload = json.dumps({"variants": variants, "loads": args.loads, "code": args.code})
        completed = subprocess.run([node, str(script), str(web / "node_modules" / "pyodide"), payload],
                                   capture_output=True, text=True, check=True, timeout=1800)
        times = json.loads(completed.stdout.strip().splitlines()[-1])
    print(f"{args.requirement}: `{args.code}` in Pyodide (Node), median of {args.loads} fresh loads")
    for name in ("source", "pyc"):
        install = [pair[0] for pair in times[name]]
        imports = [pair[1] for pair in times[name]]
        print(f"  {name:6} import {statistics.median(imports):6.1f} ms (min {min(imports):.1f}, max "
              f"{max(imports):.1f}); install from disk {statistics.median(install):6.1f} ms; "
              f"wheels {sizes[name] / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
