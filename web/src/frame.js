// The sandbox frame: an opaque-origin document (CSP `sandbox allow-scripts`) that owns the
// module worker through a RunController and talks to its parent only by checked messages.
import { RunController } from "./controller.js";
import { isMessage, message } from "./protocol.js";
import { sha256 } from "./sha256.js";

const frameStart = performance.timeOrigin + performance.now();
const config = JSON.parse(document.getElementById("wasm-runner-config").textContent);
// bundled (dist/frame.bundle.js, see build.mjs) the worker is one file too
const workerURL = new URL(import.meta.url.endsWith(".bundle.js") ? "worker.bundle.js" : "worker.js", import.meta.url).href;

function spawnBrowserWorker() {
  // An opaque-origin document may only start workers from its own blob: URLs, and Chromium
  // refuses *module* workers from such blobs. So: a classic blob worker that dynamically imports
  // the worker module from the asset origin (served with CORS). importScripts is disabled there
  // so Pyodide takes its module-worker path (its classic-worker check calls importScripts).
  const source = `self.importScripts = () => { throw new TypeError("importScripts is disabled"); };
self.pendingMessages = [];
self.onmessage = (event) => self.pendingMessages.push(event.data);
import(${JSON.stringify(workerURL)}).catch((e) => postMessage({ channel: "wasm-runner/1", type: "fatal", message: "could not load the worker: " + e }));`;
  const blobURL = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(blobURL, { name: "wasm-runner" });
  URL.revokeObjectURL(blobURL);
  return {
    post: (msg, transfer) => worker.postMessage(msg, transfer || []),
    terminate: () => worker.terminate(),
    onMessage: (fn) => { worker.onmessage = (event) => fn(event.data); },
    onError: (fn) => { worker.onerror = (event) => { event.preventDefault(); fn(new Error(event.message || "worker error")); }; },
  };
}

const toParent = (msg) => window.parent.postMessage(msg, "*");

// This frame's origin is opaque, so Chromium never caches what it fetches. The parent page
// (a normal origin, whose HTTP cache works) fetches Pyodide's large files and the snapshot and
// hands the bytes over; the workers then serve them to Pyodide from memory. The frame compiles
// the wasm once, so a spare or respawned worker only instantiates it.
const WASM_URL = new URL("pyodide.asm.wasm", config.pyodide.indexURL).href;
const RELAY = [WASM_URL, new URL("python_stdlib.zip", config.pyodide.indexURL).href];
if (config.pyodide.snapshot) RELAY.push(config.pyodide.snapshot.url);
const RELAY_WAIT_MS = 15000; // the parent always answers; this only guards against one that does not

const controller = new RunController({
  spawnWorker: spawnBrowserWorker,
  workerConfig: { ...config.pyodide, relay: RELAY },
  isolated: Boolean(globalThis.crossOriginIsolated),
  onEvent: (event) => toParent(event),
  spare: true,
});
controller.prefetch().catch(() => {}); // this frame exists because the page wants Python: start now

let relayed = false;
async function receiveAssets(files) {
  if (relayed) return;
  relayed = true;
  const arrived = performance.timeOrigin + performance.now();
  // Compile the wasm (off this thread) while the snapshot's sha256 is checked here.
  const compiling = files[WASM_URL] ? WebAssembly.compile(files[WASM_URL]).catch(() => null) : Promise.resolve(null);
  const snapshot = config.pyodide.snapshot;
  let checked = null;
  if (snapshot && files[snapshot.url]) {
    checked = await sha256(new Uint8Array(files[snapshot.url]));
    if (checked !== snapshot.sha256) {
      delete files[snapshot.url]; // the worker fetches it itself, checks it and, failing that, starts normally
      checked = null;
    }
  }
  const hashed = performance.timeOrigin + performance.now();
  const module = await compiling;
  const kept = {};
  for (const [url, body] of Object.entries(files)) if (url !== WASM_URL || !module) kept[url] = body;
  const marks = { frame_start: frameStart, relay_arrived: arrived, hashed, compiled: performance.timeOrigin + performance.now() };
  controller.provideAssets({ files: kept, module, checked, marks });
}
setTimeout(() => receiveAssets({}), RELAY_WAIT_MS);

window.addEventListener("message", (event) => {
  // Only the embedding page may drive this frame, and only with well-formed requests.
  if (event.source !== window.parent) return;
  const msg = event.data;
  if (!isMessage(msg, "run", "stop", "input", "prefetch", "assets", "host-answer")) return;
  if (msg.type === "assets") {
    const files = {};
    for (const url of RELAY) if (msg.files[url] instanceof ArrayBuffer) files[url] = msg.files[url];
    receiveAssets(files);
    return;
  }
  handleRequest(msg);
});

function handleRequest(msg) {
  if (msg.type === "prefetch") {
    controller.prefetch().catch(() => {});
  } else if (msg.type === "run") {
    controller
      .run({ id: msg.id, code: msg.code, stdin: msg.stdin, limits: msg.limits, interactive: msg.interactive, filename: msg.filename, functions: msg.functions || [], display: msg.display, packages: msg.packages || [], network: msg.network || null, lang: msg.lang })
      .then((result) => toParent(message("done", { id: msg.id, result })));
  } else if (msg.type === "stop") {
    controller.stop(msg.id);
  } else if (msg.type === "input") {
    controller.input(msg.id, msg.text);
  } else if (msg.type === "host-answer") {
    controller.hostAnswer(msg.id, msg.call, msg.answer);
  }
}

toParent(message("frame-ready", { isolated: Boolean(globalThis.crossOriginIsolated), relay: RELAY }));
