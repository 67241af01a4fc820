// `pyodide py-compile` (pyodide-build) run by Pyodide's own Python in Node, so the .pyc files are
// made by exactly the Python version the browser tier runs (no host Python of that version is
// needed). Usage: node py_compile.mjs PYODIDE_DIR SITE_PACKAGES FOLDER
// SITE_PACKAGES holds pyodide-build and its pure-Python dependencies (the pyodide-build venv);
// FOLDER holds the wheels and a pyodide-lock.json naming them, both rewritten in place.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [pyodideDir, sitePackages, folder] = process.argv.slice(2);
if (!folder) {
  console.error("usage: node py_compile.mjs PYODIDE_DIR SITE_PACKAGES FOLDER");
  process.exit(2);
}
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep });
for (const [host, mount] of [[sitePackages, "/pyodide-build"], [folder, "/wheels"]]) {
  pyodide.FS.mkdirTree(mount);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: host }, mount);
}
try {
  pyodide.runPython(`
import sys
sys.dont_write_bytecode = True  # nothing is written into the pyodide-build venv
sys.path.append("/pyodide-build")
from pyodide_build.cli.py_compile import main
main(["/wheels", "--silent", "--no-keep"], standalone_mode=False)
`);
} catch (error) {
  console.error(String(error && error.message ? error.message : error).slice(-2000));
  process.exit(1);
}
