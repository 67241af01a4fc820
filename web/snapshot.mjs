// Make the browser tier's Pyodide memory snapshot: `node snapshot.mjs OUT` writes the bytes to
// OUT. Run by `wasm-runner warm` and by the server (wasm_runner/browser/snapshot.py), which key
// it by a content hash of its inputs (Pyodide's files, src/bootstrap.py.js, src/worker-core.js,
// this file) and serve it next to Pyodide; the worker loads it instead of starting Python.
import { writeFileSync } from "node:fs";
import { loadPyodide } from "pyodide";
import { makeSnapshot, packSnapshot } from "./src/worker-core.js";

const out = process.argv[2];
if (!out) {
  console.error("usage: node snapshot.mjs OUT");
  process.exit(2);
}
// Pyodide records at start-up whether this JavaScript engine has stack switching (JSPI), and the
// snapshot keeps that answer: made without it, input() could not wait in a browser that has it
// (a page without cross-origin isolation). So refuse to make one here; the caller retries with
// the V8 flag this Node needs (wasm_runner/browser/pyodide_snapshot.py).
if (!("Suspending" in WebAssembly) && !("Suspender" in WebAssembly)) {
  console.error("this Node has no WebAssembly stack switching (JSPI); run it with the flag that enables it");
  process.exit(3);
}
const bytes = await makeSnapshot(loadPyodide);
const packed = packSnapshot(bytes);
writeFileSync(out, packed);
console.log(JSON.stringify({ memory: bytes.length, packed: packed.length }));
