// Worker entry (browser). The sandbox frame starts a blob: worker that imports this module;
// Pyodide itself is imported from the URL the frame passes in "init".
//
// "init" carries a MessagePort. Every later message, both ways, travels on that port, which only
// this module's closure holds: Python can reach the worker's global scope (`from js import ...`),
// so it can call the global postMessage, but the frame ignores that channel after "init" and
// Python has no way to reach the port (nor to patch how we post on it: the original
// MessagePort.prototype.postMessage is kept here).
import { createWorkerRuntime, trackTimers } from "./worker-core.js";

const startedAt = performance.timeOrigin + performance.now();
let runtime = null;
const portPost = MessagePort.prototype.postMessage;
const timers = trackTimers(self);

const MEDIA_TYPES = { ".wasm": "application/wasm", ".zip": "application/zip" };

/**
 * Serve the files the page fetched for the frame (see frame.js) from memory while Python loads.
 * `relayed(url)` is null for a URL nobody relays, else a promise of its bytes (null: fetch it
 * from the network after all). When the frame compiled Pyodide's wasm already, the response for
 * it is a stand-in that `WebAssembly.instantiateStreaming` answers with that module.
 */
function serveRelayed(relayed, compiled) {
  const network = globalThis.fetch;
  const standIns = new WeakSet();
  globalThis.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const pending = relayed(url);
    if (pending === null) return network(input, init);
    const body = await pending;
    const wasm = url.endsWith(".wasm") ? await compiled() : null;
    if (wasm) {
      const response = new Response(new Uint8Array(0), { status: 200, headers: { "content-type": "application/wasm" } });
      standIns.add(response);
      return response;
    }
    if (!body) return network(input, init);
    const type = MEDIA_TYPES[url.slice(url.lastIndexOf("."))] || "application/octet-stream";
    return new Response(body, { status: 200, headers: { "content-type": type } });
  };
  const instantiateStreaming = WebAssembly.instantiateStreaming;
  WebAssembly.instantiateStreaming = async (source, imports) => {
    const response = await source;
    if (!standIns.has(response)) return Reflect.apply(instantiateStreaming, WebAssembly, [response, imports]);
    const module = await compiled();
    return { module, instance: await WebAssembly.instantiate(module, imports) };
  };
  return () => {
    globalThis.fetch = network; // loaded: later fetches (packages) go to the network as usual
    WebAssembly.instantiateStreaming = instantiateStreaming;
  };
}

/** The frame's files, which arrive in "init" or, when the page was slower, in "assets" later. */
function relayFiles(urls) {
  const wanted = new Set(urls || []);
  let deliver;
  const arrived = new Promise((resolve) => { deliver = resolve; });
  return {
    relayed: (url) => (wanted.has(url) ? arrived.then((a) => (a.files && a.files[url]) || null) : null),
    compiled: () => arrived.then((a) => (a.module instanceof WebAssembly.Module ? a.module : null)),
    arrived,
    deliver: (assets) => deliver(assets && typeof assets === "object" ? assets : {}),
  };
}

async function start(msg) {
  if (runtime || !msg || msg.type !== "init" || !(msg.port instanceof MessagePort)) return;
  const port = msg.port;
  delete msg.port;
  self.onmessage = null; // nothing more is taken from the global channel
  const post = (m) => Reflect.apply(portPost, port, [m]);
  const queued = [];
  const files = relayFiles(msg.config.relay);
  port.onmessage = (event) => {
    if (event.data && event.data.type === "assets") files.deliver(event.data.assets);
    else if (runtime) runtime.handle(event.data);
    else queued.push(event.data);
  };
  if (msg.config.assets) files.deliver(msg.config.assets);
  delete msg.config.assets;
  const restore = serveRelayed(files.relayed, files.compiled);
  // the frame checked the snapshot's sha256 when the page handed it over (the worker waits for that)
  if (msg.config.snapshot) msg.config.snapshotChecked = files.arrived.then((a) => a.checked || null);
  const marks = { worker_start: startedAt };
  // Pyodide's two scripts load in parallel (pyodide.asm.mjs is 1.2 MB, never cached here).
  const asm = import(new URL("pyodide.asm.mjs", msg.config.indexURL).href);
  asm.then(() => { marks.asm_imported = performance.timeOrigin + performance.now(); }, () => {});
  const { loadPyodide } = await import(new URL("pyodide.mjs", msg.config.indexURL).href);
  marks.pyodide_imported = performance.timeOrigin + performance.now();
  files.arrived.then((assets) => {
    Object.assign(marks, assets.marks || {});
    marks.assets_arrived = performance.timeOrigin + performance.now();
  });
  msg.config.workerStartedAt = performance.now(); // ms since this worker started
  msg.config.marks = marks;
  runtime = createWorkerRuntime({
    post, loadPyodide, timers,
    loadModule: () => asm.then((m) => m.default),
    onLoaded: () => {
      restore();
      marks.python_ready = performance.timeOrigin + performance.now();
    },
  });
  runtime.handle(msg);
  for (const m of queued.splice(0)) runtime.handle(m);
}

// The blob worker that imported this module queued the messages that arrived meanwhile.
const early = self.pendingMessages || [];
self.pendingMessages = null;
self.onmessage = (event) => start(event.data);
for (const msg of early) start(msg);
