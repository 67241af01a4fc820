// Worker entry (browser). The sandbox frame starts a blob: worker that imports this module;
// Pyodide itself is imported from the URL the frame passes in "init".
//
// "init" carries a MessagePort. Every later message, both ways, travels on that port, which only
// this module's closure holds: Python can reach the worker's global scope (`from js import ...`),
// so it can call the global postMessage, but the frame ignores that channel after "init" and
// Python has no way to reach the port (nor to patch how we post on it: the original
// MessagePort.prototype.postMessage is kept here).
import { createWorkerRuntime, trackTimers } from "./worker-core.js";

let runtime = null;
const portPost = MessagePort.prototype.postMessage;
const timers = trackTimers(self);

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

async function start(msg) {
  if (runtime || !msg || msg.type !== "init" || !(msg.port instanceof MessagePort)) return;
  const port = msg.port;
  delete msg.port;
  self.onmessage = null; // nothing more is taken from the global channel
  const post = (m) => Reflect.apply(portPost, port, [m]);
  const queued = [];
  port.onmessage = (event) => (runtime ? runtime.handle(event.data) : queued.push(event.data));
  serveRelayed(msg.config.relayed);
  delete msg.config.relayed;
  const { loadPyodide } = await import(new URL("pyodide.mjs", msg.config.indexURL).href);
  msg.config.workerStartedAt = performance.now(); // ms since this worker started
  runtime = createWorkerRuntime({ post, loadPyodide, timers });
  runtime.handle(msg);
  for (const m of queued.splice(0)) runtime.handle(m);
}

// The blob worker that imported this module queued the messages that arrived meanwhile.
const early = self.pendingMessages || [];
self.pendingMessages = null;
self.onmessage = (event) => start(event.data);
for (const msg of early) start(msg);
