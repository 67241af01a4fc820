// Owns the worker: starts it lazily, runs one program at a time, enforces the wall-clock limit,
// and makes Stop always work: interrupt, interrupt again, then terminate and respawn.
// Runs inside the sandbox frame in a browser, or directly in Node for tests.
import {
  HOST_HEADER_BYTES, HOST_SLOT, HOST_STATE, INPUT_STATE, SHARED_HEADER_BYTES, SHARED_INPUT_BYTES, SLOT, STATUS,
  checkLimits, checkRequest, emptyResult, invalidResult, isDisplay, isFilename, isFunctionNames, isMessage, isPackageNames, message,
} from "./protocol.js";
import { explainResult } from "./explain.js";

const encoder = new TextEncoder();

/** How a host limit that ended a run is reported: status, limit name, message. */
const HOST_LIMITS = Object.freeze({
  host_calls: [STATUS.HOST_CALLS_LIMIT, "host_calls", (l) => `The run called the page's functions more than ${l.host_calls} times.`],
  host_bytes: [STATUS.HOST_BYTES_LIMIT, "host_bytes", (l) => `A call of the page's functions passed or returned more than ${l.host_call_bytes} bytes.`],
  host_time: [STATUS.HOST_TIME_LIMIT, "host_time", (l) => `The page's functions it called took more than ${l.host_seconds} s.`],
});

/**
 * The run's network as the page gave it (a copy of plain strings only): {on: true, token, url}
 * from the runner's POST /api/network/runs, or {on: false, refusal}; null: none given (every
 * request raises the sentence saying so). The runner checks every request again.
 */
function plainNetwork(network) {
  if (!network || typeof network !== "object") return null;
  if (network.on === true && typeof network.token === "string" && typeof network.url === "string") {
    return { on: true, token: network.token.slice(0, 200), url: network.url.slice(0, 2000) };
  }
  return { on: false, refusal: typeof network.refusal === "string" ? network.refusal.slice(0, 1000) : "" };
}

const DEFAULT_TIMINGS = Object.freeze({
  resendMs: 60, // a second interrupt if the first was lost
  terminateMs: 400, // then terminate the worker and start a fresh one
  limitGraceMs: 150, // after the worker reports its output cap, before escalating
  packageLoadMs: 120000, // loading the packages a program imports, before its wall clock starts
});

/**
 * @param {object} options
 * @param {() => {post(msg, transfer?): void, terminate(): void, onMessage(fn): void, onError(fn): void}} options.spawnWorker
 * @param {object} options.workerConfig  indexURL, lockFileURL, packageBaseUrl for Pyodide
 * @param {boolean} options.isolated  true when SharedArrayBuffer can be shared with the worker
 * @param {(event: object) => void} [options.onEvent]  stream / input-request / output / status / ready
 * @param {boolean} [options.spare]  keep a spare worker loaded (started after the first run), so
 *   the Run after a Stop that had to end the worker does not wait for a new one
 */
export class RunController {
  constructor({ spawnWorker, workerConfig, isolated, onEvent = () => {}, timings = {}, spare = false }) {
    this.spawnWorker = spawnWorker;
    this.workerConfig = workerConfig;
    this.assets = null; // what the frame relays to every worker (files, compiled wasm), once known
    this.spareWanted = Boolean(spare);
    this.spare = null; // a second, idle worker, loaded, that replaces one a Stop had to end
    this.isolated = Boolean(isolated) && typeof SharedArrayBuffer === "function";
    this.onEvent = onEvent;
    this.timings = { ...DEFAULT_TIMINGS, ...timings };
    this.worker = null; // {handle, control, inputBytes, ready: Promise<info>, info}
    this.active = null; // run in progress
    this.queue = Promise.resolve();
    this.respawns = 0;
    this.loadFailures = 0; // consecutive workers that died before "ready"
  }

  /** Start the worker now (page load), so the first run does not wait for Pyodide. */
  prefetch() {
    return this.ensureWorker().ready;
  }

  /** Files the frame relays (Pyodide's wasm, stdlib, snapshot): to the workers now and later. */
  provideAssets(assets) {
    if (this.assets) return;
    this.assets = assets;
    for (const state of [this.worker, this.spare]) {
      if (state && !state.dead && !state.hasAssets) {
        state.hasAssets = true;
        state.post(message("assets", { assets }));
      }
    }
  }

  ensureWorker() {
    if (this.worker) return this.worker;
    if (this.spare && !this.spare.dead) {
      // the spare takes over; it was loaded (or is loading) with nothing run in it
      this.worker = this.spare;
      this.spare = null;
      if (this.worker.info) this.onEvent(message("ready", { info: this.worker.info }));
      return this.worker;
    }
    this.worker = this.spawnState();
    return this.worker;
  }

  /** Start the spare worker, once the active one is ready and idle. */
  ensureSpare() {
    if (!this.spareWanted || this.spare || !this.worker || !this.worker.info) return;
    this.spare = this.spawnState();
    this.spare.isSpare = true;
  }

  spawnState() {
    const buffer = this.isolated ? new SharedArrayBuffer(SHARED_HEADER_BYTES + SHARED_INPUT_BYTES) : null;
    const handle = this.spawnWorker();
    const state = {
      handle,
      control: buffer ? new Int32Array(buffer, 0, SHARED_HEADER_BYTES / 4) : null,
      inputBytes: buffer ? new Uint8Array(buffer, SHARED_HEADER_BYTES) : null,
      info: null,
      dead: false,
    };
    state.ready = new Promise((resolve, reject) => {
      state.resolveReady = resolve;
      state.rejectReady = reject;
    });
    state.ready.catch(() => {});
    // Results come back on a MessagePort handed over in "init". The worker's global channel,
    // which the program can post on (`from js import postMessage`), is ignored except for a
    // loader failure before Python ran.
    const channel = new MessageChannel();
    state.port = channel.port1;
    state.port.onmessage = (event) => this.fromWorker(state, event.data);
    state.post = (msg) => state.port.postMessage(msg);
    handle.onMessage((msg) => {
      if (!state.info && isMessage(msg, "fatal")) this.workerFailed(state, msg.message);
    });
    handle.onError((error) => this.workerFailed(state, `the worker failed: ${error && error.message ? error.message : error}`));
    const config = { ...this.workerConfig, shared: buffer };
    if (this.assets) {
      config.assets = this.assets;
      state.hasAssets = true;
    }
    handle.post(message("init", { config, port: channel.port2 }), [channel.port2]);
    return state;
  }

  fromWorker(state, msg) {
    if (state.dead || (state !== this.worker && state !== this.spare)) return;
    if (!isMessage(msg)) return;
    if (msg.type === "ready") {
      this.loadFailures = 0;
      state.info = state.isSpare ? { ...msg.info, spare: true } : msg.info;
      state.resolveReady(state.info);
      if (state === this.worker) this.onEvent(message("ready", { info: state.info }));
      return;
    }
    if (msg.type === "fatal") {
      this.workerFailed(state, msg.message);
      return;
    }
    if (state !== this.worker) return; // the spare runs nothing
    if (msg.type === "status" && msg.id === undefined) {
      this.onEvent(msg); // said while loading, e.g. that the snapshot was not used
      return;
    }
    const run = this.active;
    if (!run || msg.id !== run.id) return;
    if (msg.type === "stream") {
      for (const chunk of msg.chunks) run.seen[chunk.stream] += chunk.text;
    } else if (msg.type === "input-request") {
      this.pauseForInput(run);
    } else if (msg.type === "host-call") {
      this.hostCall(run, msg);
      return;
    } else if (msg.type === "output") {
      run.seen.outputs.push(msg.output);
    } else if (msg.type === "limit") {
      if (!run.stopReason) {
        run.limitTimer = setTimeout(() => this.escalate(run, "output"), this.timings.limitGraceMs);
      }
    } else if (msg.type === "status" && msg.text === "running") {
      run.started = performance.now();
      this.armDeadline(run, run.limits.wall_seconds * 1000);
      return;
    } else if (msg.type === "done") {
      this.finish(run, msg.result, Boolean(msg.fatal));
      return;
    }
    this.onEvent(msg);
  }

  workerFailed(state, why) {
    if (state.dead) return;
    if (!state.info) this.loadFailures += 1;
    this.kill(state);
    if (state === this.spare) {
      this.spare = null;
      state.rejectReady(new Error(why));
      return;
    }
    state.rejectReady(new Error(why));
    const run = this.active;
    if (run && run.worker === state && run.stopReason) {
      this.settle(run, this.stoppedResult(run, this.partialResult(run)));
    } else if (run && run.worker === state) {
      const result = this.partialResult(run);
      result.status = STATUS.INTERNAL_ERROR;
      result.exit_code = null;
      result.message = `The Python runtime stopped unexpectedly (${why}); a fresh one was started.`;
      this.settle(run, result);
    }
    // Start a fresh runtime at once, unless loading itself keeps failing (then the next run tries).
    if (this.loadFailures < 2) this.ensureWorker();
  }

  /** (Re)start the wall clock with `ms` left. */
  armDeadline(run, ms) {
    clearTimeout(run.deadline);
    run.deadlineAt = performance.now() + ms;
    run.deadline = setTimeout(() => this.escalate(run, "timeout"), ms);
  }

  /** The program waits for input: its wall clock stops; the (longer) input-wait bound runs. */
  pauseForInput(run) {
    if (run.waitingSince !== undefined || run.settled) return;
    run.waitingSince = performance.now();
    run.wallLeft = Math.max(0, run.deadlineAt - run.waitingSince);
    clearTimeout(run.deadline);
    run.inputDeadline = setTimeout(() => this.escalate(run, "input"), run.limits.input_wait_seconds * 1000);
  }

  resumeAfterInput(run) {
    if (run.waitingSince === undefined) return;
    run.inputWaitMs += performance.now() - run.waitingSince;
    run.waitingSince = undefined;
    clearTimeout(run.inputDeadline);
    if (!run.stopReason) this.armDeadline(run, run.wallLeft);
  }

  kill(state) {
    state.dead = true;
    try {
      state.port.close();
    } catch {
      // already closed
    }
    try {
      state.handle.terminate();
    } catch {
      // already gone
    }
    if (this.worker === state) this.worker = null;
    if (this.spare === state) this.spare = null;
  }

  /**
   * Run one program. Resolves with a result object of the server tier's shape; never rejects
   * for anything the program does.
   */
  run(request) {
    const next = this.queue.then(() => this.runNow(request));
    this.queue = next.catch(() => {});
    return next;
  }

  async runNow({ id, code, stdin = null, limits = null, interactive = false, filename = null, functions = [], display = "figures", packages = [], network = null, lang = null }) {
    let problem = checkRequest(code, stdin);
    if (!problem && filename !== null && filename !== undefined && !isFilename(filename)) {
      problem = "filename must be 1-64 letters, digits, '.', '_', '-', '<' or '>'";
    }
    if (!problem && functions !== null && functions !== undefined && !isFunctionNames(functions)) {
      problem = "functions must be a list of Python names (letters, digits, _; not starting with _)";
    }
    if (!problem && display !== null && display !== undefined && !isDisplay(display)) {
      problem = "display must be true, false or \"figures\"";
    }
    if (!problem && packages !== null && packages !== undefined && !isPackageNames(packages)) {
      problem = "packages must be a list of at most 64 package names";
    }
    if (problem) return invalidResult(problem, this.runtimeName());
    const checked = checkLimits(limits);
    if (checked.error) return invalidResult(checked.error, this.runtimeName());
    const run = {
      id,
      lang: typeof lang === "string" ? lang : null, // the explanation's language (explain.js)
      limits: checked.limits,
      started: performance.now(),
      seen: { stdout: "", stderr: "", outputs: [] },
      inputWaitMs: 0,
      stopReason: null,
      timers: [],
      limitTimer: null,
      worker: null,
      functions: new Set(functions || []),
      hostCalls: 0, // calls the worker made (each checked here: the worker is not trusted)
      hostMs: 0, // time inside the page's functions
      hostPending: null, // {call, buffer, since, timer}
    };
    run.done = new Promise((resolve) => { run.resolve = resolve; });
    this.active = run;
    let state = this.ensureWorker();
    try {
      await Promise.race([state.ready, run.done]);
    } catch (error) {
      // the worker failed to load; one more try with a fresh worker
      state = this.ensureWorker();
      try {
        await Promise.race([state.ready, run.done]);
      } catch (again) {
        this.settle(run, { ...emptyResult(this.runtimeName()), status: STATUS.INTERNAL_ERROR, exit_code: null, message: `The browser runtime could not start: ${again.message}` });
      }
    }
    if (!run.settled) {
      run.worker = state;
      run.started = performance.now();
      this.armDeadline(run, Math.max(run.limits.wall_seconds * 1000, this.timings.packageLoadMs));
      if (state.control) Atomics.store(state.control, SLOT.INTERRUPT, 0);
      state.post(message("run", { id, code, stdin: stdin || "", limits: run.limits, interactive: Boolean(interactive), filename: typeof filename === "string" ? filename : null, functions: [...run.functions], display: isDisplay(display) ? display : "figures", packages: packages || [], network: plainNetwork(network) }));
    }
    return run.done;
  }

  /** Stop the run `id` (or the active run). The result resolves with status "cancelled". */
  stop(id) {
    const run = this.active;
    if (!run || (id !== undefined && run.id !== id)) return false;
    this.escalate(run, "cancel");
    return true;
  }

  escalate(run, reason) {
    if (run.settled || run.stopReason) return;
    run.stopReason = reason;
    run.stopAt = performance.now();
    const state = run.worker;
    if (!state) {
      // still loading: nothing runs yet; the loading worker is kept for the next run
      this.settle(run, this.stoppedResult(run, this.partialResult(run)));
      return;
    }
    if (state.control) {
      this.interrupt(state);
      this.endHostCall(run); // a call in progress: the worker stops waiting for its answer
      run.timers.push(setTimeout(() => this.interrupt(state), this.timings.resendMs));
      run.timers.push(setTimeout(() => this.terminateRun(run), this.timings.terminateMs));
    } else {
      this.terminateRun(run);
    }
  }

  interrupt(state) {
    if (state.dead) return;
    Atomics.store(state.control, SLOT.INTERRUPT, 2);
    Atomics.notify(state.control, SLOT.INTERRUPT);
    Atomics.store(state.control, SLOT.INPUT_STATE, INPUT_STATE.CANCELLED);
    Atomics.notify(state.control, SLOT.INPUT_STATE);
  }

  terminateRun(run) {
    if (run.settled) return;
    this.kill(run.worker);
    this.respawns += 1;
    this.settle(run, this.stoppedResult(run, this.partialResult(run)));
    this.ensureWorker(); // a fresh runtime starts loading at once
  }

  partialResult(run) {
    const result = emptyResult(this.runtimeName());
    result.stdout = run.seen.stdout;
    result.stderr = run.seen.stderr;
    result.outputs = run.seen.outputs.slice();
    result.exit_code = null;
    return result;
  }

  stoppedResult(run, result) {
    const reason = run.stopReason;
    result.exit_code = null;
    if (reason === "timeout") {
      result.status = STATUS.TIMEOUT;
      result.limit = "wall";
      result.message = `The run exceeded the wall-clock limit of ${run.limits.wall_seconds} s.`;
    } else if (reason === "input") {
      result.status = STATUS.TIMEOUT;
      result.limit = "input_wait"; // as the server names it
      result.message = `The program waited for input longer than ${run.limits.input_wait_seconds} s.`;
    } else if (HOST_LIMITS[reason]) {
      const [status, limit, say] = HOST_LIMITS[reason];
      result.status = status;
      result.limit = limit;
      result.message = say(run.limits);
    } else if (reason === "output") {
      result.status = STATUS.OUTPUT_LIMIT;
      result.limit = "output";
      result.stdout_truncated = result.stdout_truncated || result.stdout.length >= run.limits.stdout_bytes;
      result.stderr_truncated = result.stderr_truncated || result.stderr.length >= run.limits.stderr_bytes;
      result.message = result.message || "The run printed more than the output limit.";
    } else {
      result.status = STATUS.CANCELLED;
      result.limit = null;
      result.message = "The run was stopped.";
    }
    return result;
  }

  finish(run, result, fatal) {
    if (run.settled) return;
    if (run.stopReason && (result.status === STATUS.CANCELLED || result.status === STATUS.OUTPUT_LIMIT)) {
      if (run.stopReason !== "output" || result.status !== STATUS.OUTPUT_LIMIT) {
        this.stoppedResult(run, result);
      }
    }
    if (run.stopReason && result.status === STATUS.INTERNAL_ERROR && !fatal) {
      // The interrupt of a Stop (or a limit) landed in the runtime's own code rather than the
      // program's: the run ends as what was asked (stopped, timed out), and the runtime,
      // interrupted somewhere it should not be, is replaced.
      this.stoppedResult(run, result);
      this.replaceWorker(run.worker);
    }
    if (fatal) {
      result.status = STATUS.ERROR;
      result.exit_code = null;
      result.message = `The Python runtime crashed (often very deep recursion) and was restarted. ${result.message}`;
      this.replaceWorker(run.worker);
    }
    this.settle(run, result);
  }

  /** End a runtime that cannot be trusted to run the next program, and start the next one. */
  replaceWorker(state) {
    this.kill(state);
    this.respawns += 1;
    this.ensureWorker();
  }

  settle(run, result) {
    if (run.settled) return;
    run.settled = true;
    clearTimeout(run.deadline);
    clearTimeout(run.inputDeadline);
    clearTimeout(run.limitTimer);
    for (const t of run.timers) clearTimeout(t);
    this.endHostCall(run);
    if (run.waitingSince !== undefined) run.inputWaitMs += performance.now() - run.waitingSince;
    result.wall_ms = Math.round((performance.now() - run.started) * 1000) / 1000;
    result.input_wait_ms = Math.round(run.inputWaitMs * 1000) / 1000;
    result.limits = { ...run.limits };
    if (!result.python && this.worker && this.worker.info) result.python = this.worker.info.python;
    if (run.stopAt !== undefined) result.stop_ms = Math.round((performance.now() - run.stopAt) * 1000) / 1000;
    result.explanation = explainResult(result, result.explanation, run.limits, run.lang);
    if (this.active === run) this.active = null;
    run.resolve(result);
    // Now idle: load the spare (after the first run, so it never slows the first result down).
    this.ensureSpare();
  }

  /** Answer the program's input() request: `text` is one line, or null for end of input. */
  input(id, text) {
    const run = this.active;
    if (!run || run.id !== id || !run.worker) return false;
    const state = run.worker;
    this.resumeAfterInput(run);
    if (state.control) {
      if (text === null) {
        Atomics.store(state.control, SLOT.INPUT_STATE, INPUT_STATE.EOF);
      } else {
        const bytes = new TextEncoder().encode(String(text)).slice(0, SHARED_INPUT_BYTES);
        state.inputBytes.set(bytes);
        Atomics.store(state.control, SLOT.INPUT_LENGTH, bytes.length);
        Atomics.store(state.control, SLOT.INPUT_STATE, INPUT_STATE.READY);
      }
      Atomics.notify(state.control, SLOT.INPUT_STATE);
    } else {
      state.post(message("input", { id, text: text === null ? null : String(text) }));
    }
    return true;
  }

  /**
   * The worker asks the page to call one of its functions. Checked here, where the program cannot
   * reach: the call's number, its size, the run's count of calls, and that the name is one the
   * page gave this run; then handed to the page (onEvent "host-call") with a timer for the time
   * left inside the page's functions. A call refused here is answered here.
   */
  hostCall(run, msg) {
    if (run.stopReason || run.settled || run.hostPending || msg.call !== run.hostCalls + 1) return;
    run.hostCalls += 1;
    if (run.hostCalls > run.limits.host_calls) {
      this.escalate(run, "host_calls");
      return;
    }
    if (encoder.encode(msg.request).length > run.limits.host_call_bytes) {
      this.escalate(run, "host_bytes");
      return;
    }
    const left = run.limits.host_seconds * 1000 - run.hostMs;
    run.hostPending = {
      call: msg.call,
      buffer: msg.buffer || null,
      since: performance.now(),
      timer: setTimeout(() => this.escalate(run, "host_time"), Math.max(0, left)),
    };
    let name = null;
    try {
      const parsed = JSON.parse(msg.request);
      if (parsed && parsed.op === "host" && typeof parsed.name === "string") name = parsed.name;
      if (parsed && parsed.oversize === true) {
        // the guest found its arguments over host_call_bytes before sending them
        this.escalate(run, "host_bytes");
        return;
      }
    } catch {
      // answered below
    }
    if (name === null || !run.functions.has(name)) {
      const said = name === null ? "the call is not a host function call" : `the page gave this run no function named ${JSON.stringify(name)}`;
      this.hostAnswer(run.id, msg.call, JSON.stringify({ error: { type: name === null ? "ValueError" : "NameError", bases: [], message: said, args: null } }));
      return;
    }
    this.onEvent(message("host-call", { id: run.id, call: msg.call, request: msg.request }));
  }

  /** The page's answer to call `call` of run `id` (JSON text): checked, then to the worker. */
  hostAnswer(id, call, answer) {
    const run = this.active;
    if (!run || run.id !== id || !run.hostPending || run.hostPending.call !== call || run.stopReason) return false;
    const pending = run.hostPending;
    run.hostPending = null;
    clearTimeout(pending.timer);
    run.hostMs += performance.now() - pending.since;
    if (run.hostMs > run.limits.host_seconds * 1000) {
      this.escalate(run, "host_time");
      return false;
    }
    const bytes = encoder.encode(String(answer));
    if (bytes.length > run.limits.host_call_bytes) {
      this.escalate(run, "host_bytes");
      return false;
    }
    const state = run.worker;
    if (pending.buffer) {
      if (pending.buffer.byteLength < HOST_HEADER_BYTES + bytes.length) {
        this.escalate(run, "host_bytes");
        return false;
      }
      new Uint8Array(pending.buffer, HOST_HEADER_BYTES).set(bytes);
      const slots = new Int32Array(pending.buffer, 0, 2);
      Atomics.store(slots, HOST_SLOT.LENGTH, bytes.length);
      Atomics.store(slots, HOST_SLOT.STATE, HOST_STATE.ANSWERED);
      Atomics.notify(slots, HOST_SLOT.STATE);
    } else if (state && !state.dead) {
      state.post(message("host-answer", { id, call, answer: String(answer) }));
    }
    return true;
  }

  /** A call in progress when the run ends: its answer is dropped, the worker stops waiting. */
  endHostCall(run) {
    const pending = run.hostPending;
    if (!pending) return;
    run.hostPending = null;
    clearTimeout(pending.timer);
    run.hostMs += performance.now() - pending.since;
    if (pending.buffer) {
      const slots = new Int32Array(pending.buffer, 0, 2);
      Atomics.store(slots, HOST_SLOT.STATE, HOST_STATE.ENDED);
      Atomics.notify(slots, HOST_SLOT.STATE);
    }
  }

  runtimeName() {
    return this.worker && this.worker.info ? this.worker.info.runtime : "pyodide";
  }

  /** End the worker for good. */
  dispose() {
    if (this.active) this.escalate(this.active, "cancel");
    if (this.worker) this.kill(this.worker);
    if (this.spare) this.kill(this.spare);
  }
}
