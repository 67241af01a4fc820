// The runner inside the module worker: loads Pyodide, runs one program at a time, streams its
// output, answers input() and enforces the output cap. Environment-neutral: the browser worker
// (worker.js) and Node tests wire it to their own message port.
import { BOOTSTRAP_PY } from "./bootstrap.py.js";
import {
  INPUT_STATE, SHARED_HEADER_BYTES, SLOT, STATUS, emptyResult, message,
} from "./protocol.js";

const FLUSH_BYTES = 8192;
const FLUSH_MS = 25;

/**
 * Create the runtime. `post(msg)` sends to the controller; `loadPyodide` is Pyodide's loader.
 * Returns `{handle(msg)}`: feed it the controller's "init", "run" and "input" messages.
 */
export function createWorkerRuntime({ post, loadPyodide }) {
  let pyodide = null;
  let runPy = null;
  let runPyAsync = null;
  let ready = null;
  let control = null; // Int32Array over the shared buffer, or a local one without isolation
  let inputBytes = null; // Uint8Array view of the shared input area
  let shared = false;
  let jspi = false;
  let runtimeName = "";
  let current = null; // state of the run in progress
  const decoder = new TextDecoder();

  function makeStream(name) {
    return {
      name,
      decoder: new TextDecoder(),
      pending: "",
      lastFlush: 0,
      text: "",
      bytes: 0,
    };
  }

  function flushStream(stream) {
    if (!current || !stream.pending) return;
    post(message("stream", { id: current.id, stream: stream.name, text: stream.pending }));
    stream.pending = "";
    stream.lastFlush = performance.now();
  }

  function flushAll() {
    if (!current) return;
    flushStream(current.stdout);
    flushStream(current.stderr);
  }

  function interruptNow() {
    // Raise KeyboardInterrupt at the next check (and right now, from inside a host call).
    Atomics.store(control, SLOT.INTERRUPT, 2);
    pyodide.checkInterrupt();
  }

  function write(streamName, buffer) {
    const run = current;
    if (!run) return buffer.length;
    const stream = run[streamName];
    const cap = run.limits[`${streamName}_bytes`];
    let chunk = buffer;
    let over = false;
    if (stream.bytes + chunk.length > cap) {
      chunk = chunk.subarray(0, Math.max(0, cap - stream.bytes));
      over = true;
    }
    if (chunk.length) {
      const text = stream.decoder.decode(chunk, { stream: true });
      stream.bytes += chunk.length;
      stream.text += text;
      stream.pending += text;
    }
    const now = performance.now();
    if (stream.pending.length >= FLUSH_BYTES || now - stream.lastFlush >= FLUSH_MS) flushStream(stream);
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
    return buffer.length;
  }

  const host = {
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
    interrupts(on) {
      if (on) Atomics.store(control, SLOT.INTERRUPT, 0);
      pyodide.setInterruptBuffer(on ? control : undefined);
    },
    emit_output(kind, mime, data) {
      if (!current) return;
      const output = { kind: String(kind), mime: String(mime), data: String(data) };
      current.outputs.push(output);
      post(message("output", { id: current.id, output }));
    },
  };

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
    pyodide = await loadPyodide(options);
    const loaded = performance.now();
    runtimeName = `pyodide-${pyodide.version}`;
    pyodide.setInterruptBuffer(control);
    pyodide.setStdout({ write: (b) => write("stdout", b), isatty: false });
    pyodide.setStderr({ write: (b) => write("stderr", b), isatty: false });
    jspi = typeof WebAssembly.Suspending === "function";
    pyodide.registerJsModule("_wasm_runner_host", host);
    const namespace = pyodide.globals.get("dict")();
    pyodide.runPython(BOOTSTRAP_PY, { globals: namespace, filename: "<wasm-runner>" });
    runPy = namespace.get("_run");
    runPyAsync = namespace.get("_run_async");
    namespace.destroy();
    const info = {
      runtime: runtimeName,
      shared,
      jspi,
      interactive: shared || jspi,
      load_ms: Math.round(performance.now() - started),
      pyodide_ms: Math.round(loaded - started),
      bootstrap_ms: Math.round(performance.now() - loaded),
      worker_started_ms: config.workerStartedAt === undefined ? null : Math.round(config.workerStartedAt),
    };
    post(message("ready", { info }));
    return info;
  }

  async function run(request) {
    await ready;
    const started = performance.now();
    Atomics.store(control, SLOT.INTERRUPT, 0);
    current = {
      id: request.id,
      limits: request.limits,
      interactive: Boolean(request.interactive),
      stdin: request.stdin || "",
      stdinPos: 0,
      stdout: makeStream("stdout"),
      stderr: makeStream("stderr"),
      stdout_truncated: false,
      stderr_truncated: false,
      outputs: [],
      limitHit: null,
      limitMessage: "",
      pendingInput: null,
    };
    const run = current;
    let outcome = "ok";
    let exitCode = 0;
    let failure = "";
    let fatal = false;
    try {
      if (request.loadPackages !== false) {
        await pyodide.loadPackagesFromImports(request.code, {
          messageCallback: (text) => post(message("status", { id: run.id, text: String(text) })),
          errorCallback: (text) => post(message("status", { id: run.id, text: String(text) })),
        });
      }
      // Without isolation, input() suspends the stack (JSPI: callPromising + run_sync); with
      // it, a plain call is enough (input() waits with Atomics) and keeps asyncio out of the way.
      post(message("status", { id: run.id, text: "running" })); // packages loaded: the wall clock starts
      host.interrupts(true);
      let pair = jspi && !shared ? await runPy.callPromising(request.code) : runPy(request.code);
      if (pair === undefined || pair === null) pair = await runPyAsync(request.code);
      [outcome, exitCode] = pair.toJs();
      pair.destroy();
    } catch (error) {
      outcome = "internal";
      failure = String(error && error.message ? error.message : error);
      fatal = isFatal();
    }
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
    } else if (outcome === "interrupted") {
      result.status = STATUS.CANCELLED;
      result.exit_code = null;
      result.message = "The run was stopped.";
    } else {
      result.status = STATUS.INTERNAL_ERROR;
      result.exit_code = null;
      result.message = `The Python runtime failed: ${failure}`;
    }
    host.interrupts(false);
    current = null;
    post(message("done", { id: run.id, result, fatal }));
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
    } else if (msg.type === "input" && current && current.id === msg.id && current.pendingInput) {
      const resolve = current.pendingInput;
      current.pendingInput = null;
      resolve(msg.text === null ? undefined : String(msg.text));
    }
  }

  return { handle };
}
