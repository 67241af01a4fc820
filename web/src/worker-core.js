// The runner inside the module worker: loads Pyodide, runs one program at a time, streams its
// output, answers input() and enforces the output cap. Environment-neutral: the browser worker
// (worker.js) and Node tests wire it to their own message port.
import { BOOTSTRAP_PY } from "./bootstrap.py.js";
import { GUEST_PY, TURTLE_PY } from "./pylib.js";
import { sha256 } from "./sha256.js";
import {
  HOST_HEADER_BYTES, HOST_SLOT, HOST_STATE, INPUT_STATE, SHARED_HEADER_BYTES, SLOT, STATUS, emptyResult, invalidResult,
  message,
} from "./protocol.js";

const FLUSH_BYTES = 32768;
const FLUSH_MS = 30;
const encoder = new TextEncoder();
export const STACK_LINE = "RecursionError: Python ran out of stack (the recursion went too deep)\n";

/** The package index Pyodide installs from, and which module comes from which package. */
function describeIndex(pyodide, config) {
  const modules = new Map();
  const names = new Set();
  let url = "";
  try {
    const lock = pyodide.lockfile;
    for (const [name, entry] of Object.entries(lock.packages || {})) {
      names.add(packageName(name));
      const file = String(entry.file_name || "");
      const index = /^https?:\/\//.test(file) ? file.slice(0, file.lastIndexOf("/") + 1) : "";
      if (index && !url) url = index;
      for (const module of entry.imports || []) if (!modules.has(module)) modules.set(module, { name, index });
    }
    if (!url) url = pyodide.lockfileBaseUrl || config.packageBaseUrl || config.indexURL || "";
  } catch {
    url = config.packageBaseUrl || config.indexURL || "";
  }
  return { url, modules, names };
}

/** A distribution's canonical name (PEP 503), as the server's lock has it: `Foo_Bar` is `foo-bar`. */
export function packageName(name) {
  return String(name).replace(/[-_.]+/g, "-").toLowerCase();
}

/** The names of a program's `# requires: a, b` lines (as the server tier reads them). */
export function requiredInComments(code) {
  const names = [];
  for (const match of String(code).matchAll(/^[ \t]*#[ \t]*requires:[ \t]*(.*)$/gm)) {
    // words that are no package name ("# requires: Python 3.12") are a comment's prose
    names.push(...match[1].split("#")[0].split(/[\s,]+/).filter((n) => /^[A-Za-z][A-Za-z0-9._-]*$/.test(n) && !["python", "python3"].includes(n.toLowerCase())));
  }
  return names;
}

/**
 * The sentence for packages the browser tier does not have, as the server tier words it
 * (wasm_runner/packages/wanted.py): the server tier has them ("numpy is not on the browser tier;
 * it is on the server tier: run there, or choose auto"), or no tier has them. `tiers` is the
 * server's /tier-modules.json ({server, browser, lock}); without it, the browser tier's own words.
 */
export function tierSentence(names, tiers) {
  if (!tiers) return notAllowedInBrowser(names);
  const server = new Set(tiers.server);
  const sorted = [...new Set(names)].sort();
  const elsewhere = sorted.filter((n) => server.has(n) || server.has(packageName(n)));
  if (elsewhere.length === sorted.length) {
    const many = sorted.length > 1;
    return `${sorted.join(", ")} ${many ? "are" : "is"} not on the browser tier; ${many ? "they are" : "it is"} on the server tier: run there, or choose auto.`;
  }
  const nowhere = sorted.filter((n) => !elsewhere.includes(n));
  const which = nowhere.length > 1 ? `packages ${nowhere.join(", ")} are` : `package ${nowhere[0]} is`;
  const also = elsewhere.length ? ` ${elsewhere.join(", ")} ${elsewhere.length > 1 ? "are" : "is"} on the server tier only.` : "";
  return `The ${which} not allowed on this server (server tier and browser tier alike): the operator's wheelhouse has ${tiers.lock.join(", ") || "none"}. Ask the operator to add it to the package lock.${also}`;
}

/** The sentence for packages a browser-tier run asked for that its package index does not list. */
export function notAllowedInBrowser(names) {
  const which = names.length > 1 ? `packages ${names.join(", ")} are` : `package ${names[0]} is`;
  return `The ${which} not allowed on the browser tier: its package index (the operator's wheelhouse) does not list ${names.length > 1 ? "them" : "it"}.`;
}

/**
 * A run's network as the frame passed it: {on: true, token, url} (a grant of the runner's
 * POST /api/network/runs, the requests going to `url`) or {on: false, refusal}; null: none.
 */
function checkedNetwork(network) {
  if (!network || typeof network !== "object") return null;
  if (network.on === true && typeof network.token === "string" && typeof network.url === "string" && /^https?:\/\//.test(network.url)) {
    return { on: true, token: network.token, url: network.url, refusal: "" };
  }
  return { on: false, refusal: typeof network.refusal === "string" && network.refusal ? network.refusal.slice(0, 1000) : "network access is off for this run" };
}

/** What the Python side's `_wasm_runner_host` module becomes when a snapshot is restored. */
const HOST_TOKEN = "wasm-runner-host";

/**
 * Modules imported before a snapshot is made (besides the bootstrap's own), so a program that
 * uses them finds them loaded. Part of the snapshot's content hash (this file is an input).
 * `random` is reseeded after every restore (`_attach`).
 */
export const SNAPSHOT_PRELOAD = Object.freeze([
  "collections", "dataclasses", "functools", "itertools", "json", "math", "random", "re", "string", "typing",
]);


const PACK_MAGIC = 0x50535257; // "WRSP": wasm-runner's sparse snapshot
const PAGE = 4096;

/**
 * Pyodide's snapshot is its whole wasm memory (about 30 MB), half of it pages of zeros. Packed,
 * it holds only the pages that are not all zero: [magic, total length, run count, (offset,
 * length) per run] as little-endian u32, then the runs' bytes. Gzipped after that (6 MB), it
 * unpacks in half the time a gzip of the whole memory takes (on the critical path).
 */
export function packSnapshot(bytes) {
  const runs = [];
  for (let at = 0; at < bytes.length; at += PAGE) {
    const page = bytes.subarray(at, Math.min(at + PAGE, bytes.length));
    if (!page.every((b) => b === 0)) {
      const last = runs[runs.length - 1];
      if (last && last[0] + last[1] === at) last[1] += page.length;
      else runs.push([at, page.length]);
    }
  }
  const header = 12 + runs.length * 8;
  const out = new Uint8Array(header + runs.reduce((n, [, length]) => n + length, 0));
  const view = new DataView(out.buffer);
  view.setUint32(0, PACK_MAGIC, true);
  view.setUint32(4, bytes.length, true);
  view.setUint32(8, runs.length, true);
  let data = header;
  runs.forEach(([offset, length], i) => {
    view.setUint32(12 + i * 8, offset, true);
    view.setUint32(16 + i * 8, length, true);
    out.set(bytes.subarray(offset, offset + length), data);
    data += length;
  });
  return out;
}

/** The memory a packed snapshot holds (throws on anything else). */
export function unpackSnapshot(packed) {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  if (packed.length < 12 || view.getUint32(0, true) !== PACK_MAGIC) throw new Error("it is not a packed wasm-runner snapshot");
  const total = view.getUint32(4, true);
  const count = view.getUint32(8, true);
  const memory = new Uint8Array(total);
  let data = 12 + count * 8;
  for (let i = 0; i < count; i++) {
    const offset = view.getUint32(12 + i * 8, true);
    const length = view.getUint32(16 + i * 8, true);
    if (offset + length > total || data + length > packed.length) throw new Error("the packed snapshot is cut short");
    memory.set(packed.subarray(data, data + length), offset);
    data += length;
  }
  return memory;
}

/** The snapshot travels gzipped; DecompressionStream is native. */
async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Pyodide's module factory, wrapped so that restoring a snapshot keeps this engine's choice of
 * CPython's call trampoline. Emscripten writes it into `_PyRuntime` before Python starts (a
 * wasm helper where the engine can build one, else a JavaScript one); the snapshot's memory
 * holds the choice of the engine that made it (Node), and with the JavaScript trampoline a
 * JSPI suspension (input() without cross-origin isolation) fails with "trying to suspend JS
 * frames". So the value is read before the restore and written back after it.
 */
function keepTrampoline(loadModule, marks) {
  return async (settings) => {
    const create = await loadModule();
    const Module = await create(settings);
    if (marks) marks.instantiated = performance.timeOrigin + performance.now();
    const API = Module.API;
    const restore = API.restoreSnapshot;
    API.restoreSnapshot = (snapshot) => {
      const heap = Module.HEAP32;
      const slot = (Module.__PyRuntime + heap[Module.__PyEM_EMSCRIPTEN_TRAMPOLINE_OFFSET >>> 2]) >>> 2;
      const trampoline = heap[slot];
      const config = Reflect.apply(restore, API, [snapshot]);
      Module.HEAP32[slot] = trampoline;
      return config;
    };
    return Module;
  };
}

/**
 * wasm-runner's Python in a fresh interpreter: the host module, the guest package
 * `_wasm_runner_guest` (the Python both tiers share, from pylib.js), the bootstrap as the module
 * `_wasm_runner`, and (for a snapshot) the preloaded modules. Same code for a normal start and
 * for the snapshot, so both give the same interpreter.
 */
function installBootstrap(pyodide, host, preload = []) {
  pyodide.registerJsModule("_wasm_runner_host", host);
  const scratch = pyodide.globals.get("dict")();
  pyodide.runPython(GUEST_PY, { globals: scratch, filename: "<wasm-runner>" });
  pyodide.runPython("import sys, types\nsys.modules['_wasm_runner'] = types.ModuleType('_wasm_runner')", { globals: scratch });
  const module = pyodide.pyimport("_wasm_runner");
  const namespace = module.__dict__;
  pyodide.runPython(BOOTSTRAP_PY, { globals: namespace, filename: "<wasm-runner>" });
  namespace.destroy();
  module.destroy();
  if (preload.length) pyodide.runPython(`for name in ${JSON.stringify(preload)}: __import__(name)`, { globals: scratch });
  scratch.destroy();
}

/**
 * Make a memory snapshot of an interpreter with wasm-runner's bootstrap installed (run by
 * `wasm-runner warm` / the server through snapshot.mjs, in Node). Returns Pyodide's snapshot
 * bytes (snapshot.mjs packs them, the server gzips them);
 * `createWorkerRuntime` loads them (after checking their sha256) and falls back to a normal
 * start when they do not load.
 */
export async function makeSnapshot(loadPyodide, options = {}) {
  const placeholder = {}; // stands for the host object; restored as the worker's real one
  const pyodide = await loadPyodide({ ...options, _makeSnapshot: true, stdout: () => {}, stderr: () => {} });
  installBootstrap(pyodide, placeholder, SNAPSHOT_PRELOAD);
  return pyodide.makeMemorySnapshot({
    serializer: (obj) => {
      if (obj === placeholder) return HOST_TOKEN;
      throw new Error("the bootstrap holds a JavaScript object a snapshot cannot keep");
    },
  });
}

/**
 * Create the runtime. `post(msg)` sends to the controller (over a MessagePort the program cannot
 * reach); `loadPyodide` is Pyodide's loader; `timers` (optional) tracks the timers and workers a
 * run creates so they can be cleared when it ends (see trackTimers); `onLoaded(info)` (optional)
 * is called once Python is ready, before "ready" is posted; `loadModule()` resolves with the
 * default export of Pyodide's `pyodide.asm.mjs` (needed to restore a snapshot).
 * Returns `{handle(msg)}`: feed it the controller's "init", "run" and "input" messages.
 */
export function createWorkerRuntime({ post, loadPyodide, loadModule, timers = null, onLoaded = null }) {
  let pyodide = null;
  let runPy = null;
  let runPyAsync = null;
  let explanationPy = null; // the last run's explanation, as JSON (guest/explain.py via browser.py)
  let pythonVersion = "";
  let ready = null;
  let control = null; // Int32Array over the shared buffer, or a local one without isolation
  let inputBytes = null; // Uint8Array view of the shared input area
  let shared = false;
  let jspi = false;
  let runtimeName = "";
  let current = null; // state of the run in progress
  let packageIndex = { url: "", modules: new Map() };
  let tierModulesURL = "";
  let tierModules = null; // a promise of the server's /tier-modules.json (null: not asked yet)
  const decoder = new TextDecoder();
  let hostBuffer = null; // answers to host calls (isolated): [state, length] then the answer's bytes

  function makeStream(name) {
    return { name, decoder: new TextDecoder(), text: "", bytes: 0 };
  }

  /** Send what is pending: one "stream" message with the chunks in the order they were written. */
  function flushAll() {
    const run = current;
    if (!run || !run.pending.length) return;
    post(message("stream", { id: run.id, chunks: run.pending }));
    run.pending = [];
    run.pendingSize = 0;
    run.lastFlush = performance.now();
  }

  function interruptNow() {
    // KeyboardInterrupt at the program's next bytecode (raising it from inside this host call
    // would print it as an unraisable error).
    Atomics.store(control, SLOT.INTERRUPT, 2);
  }

  /** Append text of one stream to the run's output, within its cap; bytes is its UTF-8 length. */
  function accept(run, streamName, text, bytes) {
    const stream = run[streamName];
    const cap = run.limits[`${streamName}_bytes`];
    let over = false;
    if (stream.bytes + bytes > cap) {
      // keep whole characters up to the cap
      const room = Math.max(0, cap - stream.bytes);
      const cut = encoder.encode(text).subarray(0, room);
      text = new TextDecoder().decode(cut).replace(/\uFFFD$/, "");
      bytes = encoder.encode(text).length;
      over = true;
    }
    if (text) {
      stream.bytes += bytes;
      stream.text += text;
      const last = run.pending[run.pending.length - 1];
      if (last && last.stream === streamName) last.text += text;
      else run.pending.push({ stream: streamName, text });
      run.pendingSize += text.length;
    }
    const now = performance.now();
    if (run.pendingSize >= FLUSH_BYTES || now - run.lastFlush >= FLUSH_MS) flushAll();
    if (over && !run[`${streamName}_truncated`]) {
      // First overflow: raise KeyboardInterrupt in the program. Later writes are dropped; a
      // program that swallows the interrupt is stopped by the controller.
      run[`${streamName}_truncated`] = true;
      if (!run.limitHit) {
        run.limitHit = "output";
        run.limitMessage = `The run printed more than the ${streamName} limit of ${cap} bytes.`;
        flushAll();
        post(message("limit", { id: run.id, limit: "output" }));
      }
      interruptNow();
    }
  }

  /** Raw bytes written to fd 1/2 (sys.stdout.buffer, os.write): same ordered stream. */
  function write(streamName, buffer) {
    const run = current;
    if (!run || run.crashed) return buffer.length;
    const text = run[streamName].decoder.decode(buffer, { stream: true });
    if (/^(Fatal Python error|Stack \(most recent call first\)|Current thread|Thread 0x)/.test(text)) {
      // the runtime is crashing and dumps its own frames: not the student's output
      run.crashed = true;
      return buffer.length;
    }
    accept(run, streamName, text, buffer.length);
    return buffer.length;
  }

  const host = {
    // Text the program printed (batched by the bootstrap's ordered stream).
    write(streamName, text) {
      const run = current;
      if (!run || (streamName !== "stdout" && streamName !== "stderr")) return;
      text = String(text);
      if (run[`${streamName}_truncated`]) {
        interruptNow();
        return;
      }
      accept(run, streamName, text, encoder.encode(text).length);
    },
    input_mode() {
      if (!current || !current.interactive) return "none";
      if (shared) return "shared";
      if (jspi) return "jspi";
      return "unavailable";
    },
    shared() {
      return shared;
    },
    // Functions called from Python return undefined (None), never null (JsNull).
    next_stdin_line() {
      const run = current;
      if (!run || run.stdinPos >= run.stdin.length) return undefined;
      const end = run.stdin.indexOf("\n", run.stdinPos);
      const stop = end === -1 ? run.stdin.length : end + 1;
      const line = run.stdin.slice(run.stdinPos, stop);
      run.stdinPos = stop;
      return line;
    },
    read_line_blocking(prompt) {
      const run = current;
      flushAll();
      Atomics.store(control, SLOT.INPUT_STATE, INPUT_STATE.IDLE);
      post(message("input-request", { id: run.id, prompt: String(prompt) }));
      for (;;) {
        Atomics.wait(control, SLOT.INPUT_STATE, INPUT_STATE.IDLE, 100);
        if (Atomics.load(control, SLOT.INTERRUPT) !== 0) pyodide.checkInterrupt();
        const state = Atomics.load(control, SLOT.INPUT_STATE);
        if (state === INPUT_STATE.IDLE) continue;
        Atomics.store(control, SLOT.INPUT_STATE, INPUT_STATE.IDLE);
        if (state === INPUT_STATE.READY) {
          const length = Atomics.load(control, SLOT.INPUT_LENGTH);
          return decoder.decode(inputBytes.slice(0, length));
        }
        return undefined; // EOF or cancelled
      }
    },
    read_line_async(prompt) {
      const run = current;
      flushAll();
      return new Promise((resolve) => {
        run.pendingInput = resolve;
        post(message("input-request", { id: run.id, prompt: String(prompt) }));
      });
    },
    wait(ms) {
      Atomics.wait(control, SLOT.INTERRUPT, 0, Math.max(0, Number(ms)));
      if (Atomics.load(control, SLOT.INTERRUPT) !== 0) pyodide.checkInterrupt();
    },
    flush() {
      flushAll();
    },
    // On only while a program runs (_run turns it on after its set-up): a Stop that arrived
    // while the run was starting (packages, set-up) is kept, and lands at the program's start.
    interrupts(on) {
      pyodide.setInterruptBuffer(on ? control : undefined);
    },
    // Calls of the page's functions (host functions): over the channel input() uses.
    host_functions() {
      return current ? current.functions.join(",") : ""; // Python names: no commas in them
    },
    host_call_bytes() {
      return current ? current.limits.host_call_bytes : 1 << 20;
    },
    host_mode() {
      if (!current || !current.functions.length) return "none";
      if (shared) return "shared";
      if (jspi) return "jspi";
      return "unavailable";
    },
    // Cross-origin isolated: post the request, wait on this worker's answer buffer (which the
    // frame fills in and notifies), with a Stop or a limit landing as KeyboardInterrupt.
    host_call_blocking(request) {
      const run = current;
      flushAll();
      const size = HOST_HEADER_BYTES + run.limits.host_call_bytes;
      if (!hostBuffer || hostBuffer.byteLength < size) hostBuffer = new SharedArrayBuffer(size);
      const state = new Int32Array(hostBuffer, 0, 2);
      Atomics.store(state, HOST_SLOT.STATE, HOST_STATE.WAITING);
      run.hostCalls += 1;
      post(message("host-call", { id: run.id, call: run.hostCalls, request: String(request), buffer: hostBuffer }));
      for (;;) {
        Atomics.wait(state, HOST_SLOT.STATE, HOST_STATE.WAITING, 50);
        if (Atomics.load(control, SLOT.INTERRUPT) !== 0) pyodide.checkInterrupt();
        const now = Atomics.load(state, HOST_SLOT.STATE);
        if (now === HOST_STATE.WAITING) continue;
        if (now !== HOST_STATE.ANSWERED) return undefined; // the run is ending
        const length = Atomics.load(state, HOST_SLOT.LENGTH);
        return decoder.decode(new Uint8Array(hostBuffer, HOST_HEADER_BYTES, length).slice());
      }
    },
    // Not isolated: the program's stack is suspended (JSPI) until the answer message arrives.
    host_call_async(request) {
      const run = current;
      flushAll();
      run.hostCalls += 1;
      const call = run.hostCalls;
      return new Promise((resolve) => {
        run.pendingHost = { call, resolve };
        post(message("host-call", { id: run.id, call, request: String(request) }));
      });
    },
    // The network (docs/security.md, "Network"): "on" or "off", a newline, then the sentence
    // every request raises when it is off (the runner's, or why the page has no grant).
    network_state() {
      const network = current && current.network;
      if (network && network.on) return "on\n";
      return `off\n${network ? network.refusal : "network access is off for this run: the page gave it no network grant"}`;
    },
    // One request of the run's network shim, made by the runner under the run's grant: a
    // synchronous XMLHttpRequest (a worker may), the token in the text/plain body (no preflight).
    network_fetch(request) {
      const network = current && current.network;
      if (!network || !network.on) return undefined;
      flushAll();
      const body = `{"token":${JSON.stringify(network.token)},"request":${request}}`;
      try {
        const xhr = new XMLHttpRequest();
        xhr.open("POST", network.url, false);
        xhr.setRequestHeader("content-type", "text/plain;charset=UTF-8");
        xhr.send(body);
        if (xhr.responseText) return xhr.responseText;
        return JSON.stringify({ error: { type: "ConnectionRefusedError", message: `the runner answered the network request with ${xhr.status} and nothing else` } });
      } catch (error) {
        return JSON.stringify({ error: { type: "ConnectionRefusedError", message: `the runner could not be reached for the network request (${error && error.name ? error.name : error})` } });
      }
    },
    emit_output(kind, mime, data) {
      if (!current) return;
      // where it came among the streams: the UTF-8 bytes of each written so far (Result.Output.at;
      // notebook_outputs keeps the program's order with it)
      const at = { stdout: current.stdout.bytes, stderr: current.stderr.bytes };
      const output = { kind: String(kind), mime: String(mime), data: String(data), at };
      current.outputs.push(output);
      post(message("output", { id: current.id, output }));
    },
  };

  /**
   * Load Pyodide from the memory snapshot the server made (web/snapshot.mjs; served gzipped).
   * Its bytes are given (Node), or fetched (the browser worker serves them from what the page
   * relayed). Their sha256 must be the one the sandbox page named: checked here, unless the
   * frame checked these very bytes already (`checked`). Runs while Pyodide's JS loads.
   */
  function loadFromSnapshot(options, snapshot, marks) {
    const bytes = (async () => {
      let data = snapshot.bytes;
      if (!data) {
        const response = await fetch(snapshot.url);
        if (!response.ok) throw new Error(`fetching it answered ${response.status}`);
        data = await response.arrayBuffer();
      }
      data = data instanceof Uint8Array ? data : new Uint8Array(data);
      if (marks) marks.snapshot_bytes = performance.timeOrigin + performance.now();
      if ((await snapshot.checked) !== snapshot.sha256) {
        const digest = await sha256(data);
        if (digest !== snapshot.sha256) throw new Error(`its sha256 is ${digest.slice(0, 12)}…, expected ${String(snapshot.sha256).slice(0, 12)}…`);
      }
      const memory = unpackSnapshot(await gunzip(data));
      if (marks) marks.snapshot_unpacked = performance.timeOrigin + performance.now();
      return memory;
    })();
    bytes.catch(() => {});
    return loadPyodide({
      ...options,
      createPyodideModule: keepTrampoline(loadModule, marks),
      _loadSnapshot: bytes,
      _snapshotDeserializer: (token) => {
        if (token === HOST_TOKEN) return host;
        throw new Error(`unknown object ${JSON.stringify(token)} in the snapshot`);
      },
    });
  }

  async function init(config) {
    const started = performance.now();
    if (typeof SharedArrayBuffer === "function" && config.shared instanceof SharedArrayBuffer) {
      shared = true;
      control = new Int32Array(config.shared, 0, SHARED_HEADER_BYTES / 4);
      inputBytes = new Uint8Array(config.shared, SHARED_HEADER_BYTES);
    } else {
      // No SharedArrayBuffer without cross-origin isolation: a local buffer still lets the
      // worker raise KeyboardInterrupt in its own thread (output cap); Stop then terminates.
      control = new Int32Array(SHARED_HEADER_BYTES / 4);
    }
    const options = { indexURL: config.indexURL };
    if (config.lockFileURL) options.lockFileURL = config.lockFileURL;
    if (config.packageBaseUrl) options.packageBaseUrl = config.packageBaseUrl;
    options.stdout = () => {};
    options.stderr = () => {};
    // A memory snapshot holds the interpreter with the bootstrap already run; verified by its
    // sha256 first. Anything wrong with it (tampered, stale, another build) means a normal start.
    let snapshotState = config.snapshot ? "used" : "none";
    if (config.snapshot && config.snapshotChecked) config.snapshot.checked = config.snapshotChecked;
    let snapshotNote = "";
    if (config.snapshot) {
      try {
        pyodide = await loadFromSnapshot(options, config.snapshot, config.marks);
      } catch (error) {
        pyodide = null;
        snapshotState = "rejected";
        snapshotNote = String(error && error.message ? error.message : error).split("\n")[0].slice(0, 200);
        post(message("status", { text: `The Python snapshot was not used (${snapshotNote}); starting Python normally.` }));
      }
    }
    delete config.snapshot;
    if (!pyodide) {
      pyodide = await loadPyodide(options);
      installBootstrap(pyodide, host);
    }
    const loaded = performance.now();
    if (config.marks) config.marks.pyodide_loaded = performance.timeOrigin + loaded;
    runtimeName = `pyodide-${pyodide.version}`;
    // No interrupt buffer until a program runs: a Stop must never land in Pyodide's own Python
    // (finding a program's imports, loading packages) and fail the runtime there.
    pyodide.setInterruptBuffer(undefined);
    pyodide.setStdout({ write: (b) => write("stdout", b), isatty: false });
    pyodide.setStderr({ write: (b) => write("stderr", b), isatty: false });
    jspi = typeof WebAssembly.Suspending === "function";
    // `import turtle`: wasm-runner's window-less turtle (as on the server), ahead of the stdlib's.
    // Files live outside the wasm memory, so they are written after a snapshot restore too.
    pyodide.FS.mkdirTree("/wasm-runner");
    pyodide.FS.writeFile("/wasm-runner/turtle.py", TURTLE_PY);
    const module = pyodide.pyimport("_wasm_runner");
    module._attach();
    runPy = module._run.copy(); // attribute proxies are borrowed from `module`: keep copies
    runPyAsync = module._run_async.copy();
    explanationPy = module._explanation_json.copy();
    pythonVersion = String(module._python_version());
    module.destroy();
    packageIndex = describeIndex(pyodide, config);
    tierModulesURL = typeof config.tierModulesURL === "string" ? config.tierModulesURL : "";
    tiers(); // asked now, before any program runs (a program could patch the worker's fetch)
    const info = {
      runtime: runtimeName,
      python: pythonVersion,
      package_index: packageIndex.url,
      shared,
      jspi,
      interactive: shared || jspi,
      snapshot: snapshotState,
      snapshot_note: snapshotNote,
      load_ms: Math.round(performance.now() - started),
      pyodide_ms: Math.round(loaded - started),
      bootstrap_ms: Math.round(performance.now() - loaded),
      worker_started_ms: config.workerStartedAt === undefined ? null : Math.round(config.workerStartedAt),
      marks: config.marks || null,
    };
    if (onLoaded) onLoaded(info);
    post(message("ready", { info }));
    return info;
  }

  async function run(request) {
    await ready;
    if (timers) timers.clear(); // nothing a previous run left behind fires during this one
    const started = performance.now();
    // The slot is cleared when a run ends (below) and by the controller before it sends a run;
    // not here: a Stop of this run may already be in it.
    const filename = typeof request.filename === "string" && request.filename ? request.filename : "<string>";
    // the last expression's value shown (true), figures only ("figures", the default) or neither
    const display = request.display === true || request.display === false ? request.display : "figures";
    // packages asked for by name or by `# requires:` lines: each must be in the served lock
    const asked = [...(Array.isArray(request.packages) ? request.packages : []), ...requiredInComments(request.code)];
    const refused = [...new Set(asked.filter((n) => !packageIndex.names.has(packageName(n)) && !packageIndex.modules.has(n)))];
    if (refused.length) {
      const result = { ...invalidResult(tierSentence(refused, await tiers()), runtimeName), refused_packages: refused };
      post(message("done", { id: request.id, result, fatal: false }));
      return;
    }
    current = {
      id: request.id,
      limits: request.limits,
      interactive: Boolean(request.interactive),
      stdin: request.stdin || "",
      stdinPos: 0,
      stdout: makeStream("stdout"),
      stderr: makeStream("stderr"),
      pending: [],
      pendingSize: 0,
      lastFlush: 0,
      stdout_truncated: false,
      stderr_truncated: false,
      outputs: [],
      limitHit: null,
      limitMessage: "",
      pendingInput: null,
      functions: Array.isArray(request.functions) ? request.functions.map(String) : [],
      hostCalls: 0,
      pendingHost: null,
      network: checkedNetwork(request.network),
    };
    const run = current;
    let outcome = "ok";
    let exitCode = 0;
    let failure = "";
    let fatal = false;
    let guestExplanation = null;
    const loadErrors = [];
    try {
      if (asked.length) {
        await pyodide.loadPackage([...new Set(asked.map((n) => packageIndex.modules.get(n)?.name || packageName(n)))], {
          messageCallback: (text) => post(message("status", { id: run.id, text: String(text) })),
          errorCallback: (text) => {
            loadErrors.push(String(text));
            post(message("status", { id: run.id, text: String(text) }));
          },
        });
      }
      if (request.loadPackages !== false) {
        await pyodide.loadPackagesFromImports(request.code, {
          messageCallback: (text) => post(message("status", { id: run.id, text: String(text) })),
          errorCallback: (text) => {
            loadErrors.push(String(text));
            post(message("status", { id: run.id, text: String(text) }));
          },
        });
      }
      // Without isolation, input() suspends the stack (JSPI: callPromising + run_sync); with
      // it, a plain call is enough (input() waits with Atomics) and keeps asyncio out of the way.
      post(message("status", { id: run.id, text: "running" })); // packages loaded: the wall clock starts
      let pair = jspi && !shared ? await runPy.callPromising(request.code, filename, display) : runPy(request.code, filename, display);
      if (pair === undefined || pair === null) pair = await runPyAsync(request.code, filename, display);
      [outcome, exitCode] = pair.toJs();
      pair.destroy();
      guestExplanation = readExplanation();
    } catch (error) {
      outcome = "internal";
      failure = String(error && error.message ? error.message : error);
      fatal = isFatal();
    }
    if (timers) timers.clear(); // timers, intervals and workers the program started end with it
    flushAll();
    // finish partially decoded UTF-8
    for (const stream of [run.stdout, run.stderr]) stream.text += stream.decoder.decode();
    const result = emptyResult(runtimeName);
    result.stdout = run.stdout.text;
    result.stderr = run.stderr.text;
    result.stdout_truncated = run.stdout_truncated;
    result.stderr_truncated = run.stderr_truncated;
    result.outputs = run.outputs;
    result.exit_code = exitCode === undefined ? null : exitCode;
    result.wall_ms = Math.round((performance.now() - started) * 1000) / 1000;
    result.python = pythonVersion;
    result.explanation = guestExplanation; // {id, params, span}: the controller checks and renders it
    if (run.limitHit) {
      result.status = STATUS.OUTPUT_LIMIT;
      result.limit = run.limitHit;
      result.message = run.limitMessage;
      result.exit_code = null;
    } else if (outcome === "ok") {
      result.status = STATUS.OK;
    } else if (outcome === "error") {
      result.status = STATUS.ERROR;
      result.message = `The program exited with code ${exitCode}.`;
      const missing = missingPackage(result.stderr, loadErrors);
      if (missing && missing.reason === "not_listed") {
        // which tier has it, in the server tier's words (the server's image is not the browser's)
        const known = await tiers();
        if (known) {
          missing.tier = new Set(known.server).has(missing.module) ? "server" : null;
          missing.sentence = tierSentence([missing.module], known);
        }
      }
      if (missing) result.missing = missing;
    } else if (outcome === "stack") {
      result.status = STATUS.ERROR;
      result.limit = "stack";
      result.message = "Python ran out of stack.";
    } else if (outcome === "interrupted") {
      result.status = STATUS.CANCELLED;
      result.exit_code = null;
      result.message = "The run was stopped.";
    } else if (fatal && /call stack|recursion/i.test(failure)) {
      // The JavaScript stack ran out before Python's recursion limit: say so, as the server does.
      run.stderr.text += STACK_LINE;
      post(message("stream", { id: run.id, chunks: [{ stream: "stderr", text: STACK_LINE }] }));
      result.stderr = run.stderr.text;
      result.status = STATUS.ERROR;
      result.exit_code = 1;
      result.limit = "stack";
      result.message = "Python ran out of stack.";
    } else {
      result.status = STATUS.INTERNAL_ERROR;
      result.exit_code = null;
      result.message = `The Python runtime failed: ${failure}`;
    }
    try {
      host.interrupts(false);
    } catch {
      // a crashed runtime; the controller replaces it
    }
    // What this run's Stop or output cap left in the slot does not reach the next run.
    Atomics.store(control, SLOT.INTERRUPT, 0);
    current = null;
    post(message("done", { id: run.id, result, fatal }));
  }

  /** The server's /tier-modules.json, fetched once (null: none served, or unreadable). */
  function tiers() {
    if (!tierModulesURL) return Promise.resolve(null);
    if (!tierModules) {
      tierModules = fetch(tierModulesURL)
        .then((response) => (response.ok ? response.json() : null))
        .then((body) => (body && Array.isArray(body.server) && Array.isArray(body.lock) ? body : null))
        .catch(() => null);
    }
    return tierModules;
  }

  /** The guest's explanation of the run that just ended (null: none, or unreadable). */
  function readExplanation() {
    try {
      const text = String(explanationPy());
      return text ? JSON.parse(text) : null;
    } catch {
      return null;
    }
  }

  /** Why the module a program failed to import is not there: not in the index, or unreachable. */
  function missingPackage(stderr, loadErrors) {
    const found = /ModuleNotFoundError: No module named '([\w.]+)'(\. Did you mean: '[\w.]+'\?)?/.exec(stderr);
    if (!found) return null;
    const module = found[1].split(".")[0];
    const entry = packageIndex.modules.get(module);
    if (!entry) {
      // a typo of a module Python has ("maths"): its "Did you mean" is the help; the server has no
      // such package either, so no note and no offer to run it there
      if (found[2]) return null;
      return { module, package: null, reason: "not_listed", index: packageIndex.url, detail: "" };
    }
    if (pyodide.loadedPackages && pyodide.loadedPackages[entry.name]) return null; // loaded; the error is something else
    return { module, package: entry.name, reason: "unreachable", index: entry.index || packageIndex.url, detail: loadErrors.join("\n").slice(0, 500) };
  }

  function isFatal() {
    try {
      pyodide.runPython("0");
      return false;
    } catch {
      return true;
    }
  }

  function handle(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "init") {
      ready = init(msg.config).catch((error) => {
        post(message("fatal", { message: `Pyodide failed to load: ${error && error.message ? error.message : error}` }));
        throw error;
      });
    } else if (msg.type === "run") {
      run(msg).catch((error) => post(message("fatal", { message: String(error) })));
    } else if (msg.type === "host-answer" && current && current.id === msg.id && current.pendingHost
      && current.pendingHost.call === msg.call) {
      const { resolve } = current.pendingHost;
      current.pendingHost = null;
      resolve(String(msg.answer));
    } else if (msg.type === "input" && current && current.id === msg.id && current.pendingInput) {
      const resolve = current.pendingInput;
      current.pendingInput = null;
      resolve(msg.text === null ? undefined : String(msg.text));
    }
  }

  return { handle };
}

/**
 * Track the timers, intervals and nested workers created in this worker (by the program, through
 * `js`), so each run can end them: nothing a run starts reaches the next one. Call once, before
 * Python loads; the originals stay in this closure.
 */
export function trackTimers(scope = globalThis) {
  const setT = scope.setTimeout;
  const setI = scope.setInterval;
  const clearT = scope.clearTimeout;
  const clearI = scope.clearInterval;
  const timeouts = new Set();
  const intervals = new Set();
  const workers = new Set();
  const wrapTimeout = function setTimeout(fn, ms, ...args) {
    const id = Reflect.apply(setT, scope, [typeof fn === "function" ? (...a) => { timeouts.delete(id); return fn(...a); } : fn, ms, ...args]);
    timeouts.add(id);
    return id;
  };
  const wrapInterval = function setInterval(fn, ms, ...args) {
    const id = Reflect.apply(setI, scope, [fn, ms, ...args]);
    intervals.add(id);
    return id;
  };
  const define = (target, name, value) => {
    try {
      Object.defineProperty(target, name, { value, writable: true, configurable: true });
    } catch {
      // not configurable here
    }
  };
  const targets = [scope];
  for (let proto = Object.getPrototypeOf(scope); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    if (Object.prototype.hasOwnProperty.call(proto, "setTimeout")) targets.push(proto);
  }
  for (const target of targets) {
    define(target, "setTimeout", wrapTimeout);
    define(target, "setInterval", wrapInterval);
  }
  const NativeWorker = scope.Worker;
  if (typeof NativeWorker === "function") {
    const TrackedWorker = function Worker(...args) {
      const worker = Reflect.construct(NativeWorker, args, new.target || TrackedWorker);
      workers.add(worker);
      return worker;
    };
    TrackedWorker.prototype = NativeWorker.prototype;
    define(scope, "Worker", TrackedWorker);
  }
  return {
    clear() {
      for (const id of timeouts) Reflect.apply(clearT, scope, [id]);
      for (const id of intervals) Reflect.apply(clearI, scope, [id]);
      for (const worker of workers) {
        try { worker.terminate(); } catch { /* gone */ }
      }
      timeouts.clear();
      intervals.clear();
      workers.clear();
    },
    get size() {
      return timeouts.size + intervals.size + workers.size;
    },
  };
}
