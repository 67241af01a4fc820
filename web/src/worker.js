// Worker entry (browser). The sandbox frame starts a blob: worker that imports this module;
// Pyodide itself is imported from the URL the frame passes in "init".
import { createWorkerRuntime } from "./worker-core.js";

let runtime = null;

const MEDIA_TYPES = { ".wasm": "application/wasm", ".zip": "application/zip" };

/** Serve the files the page relayed (see frame.js) from memory; everything else goes out. */
function serveRelayed(files) {
  const network = globalThis.fetch;
  const pending = new Map(Object.entries(files || {}));
  if (!pending.size) return;
  globalThis.fetch = (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const body = pending.get(url);
    if (body === undefined) return network(input, init);
    pending.delete(url); // each file is read once; later fetches go to the network
    const type = MEDIA_TYPES[url.slice(url.lastIndexOf("."))] || "application/octet-stream";
    return Promise.resolve(new Response(body, { status: 200, headers: { "content-type": type } }));
  };
}

async function handle(msg) {
  if (!runtime && msg && msg.type === "init") {
    serveRelayed(msg.config.relayed);
    delete msg.config.relayed;
    const { loadPyodide } = await import(new URL("pyodide.mjs", msg.config.indexURL).href);
    msg.config.workerStartedAt = performance.now(); // ms since this worker started
    runtime = createWorkerRuntime({ post: (m) => self.postMessage(m), loadPyodide });
  }
  if (runtime) runtime.handle(msg);
}

// The blob worker that imported this module queued the messages that arrived meanwhile.
const early = self.pendingMessages || [];
self.pendingMessages = null;
self.onmessage = (event) => handle(event.data);
for (const msg of early) handle(msg);
