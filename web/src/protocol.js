// Message shapes shared by the client, the sandbox frame, the controller and the worker.
// Every receiver checks a message's shape before acting on it: the worker runs untrusted code,
// so nothing it (or a frame) sends is trusted beyond "is this a well-formed event of my run".

/** Statuses shared with the server tier (wasm_runner/result.py). */
export const STATUS = Object.freeze({
  OK: "ok",
  ERROR: "error",
  CPU_LIMIT: "cpu_limit",
  TIMEOUT: "timeout",
  MEMORY_LIMIT: "memory_limit",
  OUTPUT_LIMIT: "output_limit",
  DISK_LIMIT: "disk_limit",
  INVALID_INPUT: "invalid_input",
  INTERNAL_ERROR: "internal_error",
  CANCELLED: "cancelled",
  HOST_CALLS_LIMIT: "host_calls_limit",
  HOST_BYTES_LIMIT: "host_bytes_limit",
  HOST_TIME_LIMIT: "host_time_limit",
});

/** Defaults matching the server tier's `Limits` where a browser can enforce them. */
export const DEFAULT_LIMITS = Object.freeze({
  wall_seconds: 10,
  stdout_bytes: 1 << 20,
  stderr_bytes: 1 << 20,
  input_wait_seconds: 300, // waiting for an answer to input(): not counted in wall_seconds
  host_calls: 100000, // host functions (issue 24): calls per run,
  host_call_bytes: 1 << 20, // one call's encoded arguments or result,
  host_seconds: 5, // time inside them in all (within wall_seconds)
});

/** Ranges of the limits a browser enforces (same bounds as wasm_runner/limits.py). */
export const LIMIT_RANGES = Object.freeze({
  wall_seconds: [0.05, 3600],
  stdout_bytes: [0, 256 << 20],
  stderr_bytes: [0, 256 << 20],
  input_wait_seconds: [1, 86400],
  host_calls: [0, 10000000],
  host_call_bytes: [1024, 16 << 20],
  host_seconds: [0.01, 3600],
});

/** Limits the browser cannot enforce; accepted for shape compatibility with the server API. */
export const SERVER_ONLY_LIMITS = Object.freeze(["cpu_seconds", "memory_mb", "disk_mb", "max_files"]);

export const MAX_SOURCE_BYTES = 1 << 20;

/** Shared-buffer layout (Int32 slots) used when the frame is cross-origin isolated. */
export const SLOT = Object.freeze({ INTERRUPT: 0, INPUT_STATE: 1, INPUT_LENGTH: 2 });
export const INPUT_STATE = Object.freeze({ IDLE: 0, READY: 1, EOF: 2, CANCELLED: 3 });
export const SHARED_HEADER_BYTES = 16;
export const SHARED_INPUT_BYTES = 1 << 16;
/** A worker's answer buffer for host calls (its own SharedArrayBuffer): Int32 slots, then bytes. */
export const HOST_SLOT = Object.freeze({ STATE: 0, LENGTH: 1 });
export const HOST_STATE = Object.freeze({ WAITING: 0, ANSWERED: 1, ENDED: 2 });
export const HOST_HEADER_BYTES = 8;

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isString = (v) => typeof v === "string";
const isRunId = (v) => typeof v === "number" && Number.isInteger(v) && v > 0;
const isCallNo = (v) => typeof v === "number" && Number.isInteger(v) && v > 0;
const isBuffer = (v) => v === undefined || (typeof SharedArrayBuffer === "function" && v instanceof SharedArrayBuffer);
/** The names of the page's functions a run may call (runner.expose; see hostcalls.js). */
/** Packages a run asks for by name (the operator's wheelhouse): at most 64 distribution names. */
export const isPackageNames = (v) => Array.isArray(v) && v.length <= 64 && v.every((n) => isString(n) && /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(n));
export const isFunctionNames = (v) => Array.isArray(v) && v.length <= 1000 && v.every((n) => isString(n) && /^[A-Za-z][A-Za-z0-9_]{0,99}$/.test(n));
const isChunk = (c) => isObject(c) && (c.stream === "stdout" || c.stream === "stderr") && isString(c.text);
/** A program's file name as tracebacks show it: short, printable, no path separators. */
export const isFilename = (v) => isString(v) && /^[\w.<>-]{1,64}$/.test(v);
/** A run's `display`, as the server's API has it: true (figures and the last expression's value), "figures", false. */
export const isDisplay = (v) => v === true || v === false || v === "figures";

/** The name the playground and the embed give every program, on both tiers. */
export const STUDENT_FILENAME = "main.py";

/** The empty result skeleton; every field the server tier's result has. */
export function emptyResult(runtime) {
  return {
    status: STATUS.OK,
    exit_code: 0,
    stdout: "",
    stderr: "",
    stdout_truncated: false,
    stderr_truncated: false,
    fuel_used: 0,
    wall_ms: 0,
    files: [],
    outputs: [],
    message: "",
    limit: null,
    runtime: runtime || "",
    explanation: null, // {id, title, text, hint, span, params, lang}: explain.js
  };
}

/** A result for a request refused before it ran. */
export function invalidResult(message, runtime) {
  return { ...emptyResult(runtime), status: STATUS.INVALID_INPUT, exit_code: null, message };
}

/**
 * Check and normalise browser-tier limits; returns {limits} or {error}. Unknown names are
 * refused, server-only ones are accepted and ignored (the browser cannot enforce them).
 */
export function checkLimits(requested) {
  const limits = { ...DEFAULT_LIMITS };
  if (requested === undefined || requested === null) return { limits };
  if (!isObject(requested)) return { error: "limits must be an object" };
  for (const [name, value] of Object.entries(requested)) {
    if (value === null || value === undefined) continue;
    if (SERVER_ONLY_LIMITS.includes(name)) continue;
    const range = LIMIT_RANGES[name];
    if (!range) return { error: `unknown limit: ${name}` };
    if (typeof value !== "number" || !Number.isFinite(value)) {
      return { error: `${name} must be a number, got ${JSON.stringify(value)}` };
    }
    if (value < range[0] || value > range[1]) {
      return { error: `${name} must be between ${range[0]} and ${range[1]}, got ${value}` };
    }
    limits[name] = value;
  }
  return { limits };
}

/** Check a run request's code and stdin; returns an error sentence or "". */
export function checkRequest(code, stdin) {
  if (!isString(code)) return "code must be a string";
  if (new TextEncoder().encode(code).length > MAX_SOURCE_BYTES) {
    return `code is larger than ${MAX_SOURCE_BYTES} bytes`;
  }
  if (stdin !== undefined && stdin !== null && !isString(stdin)) return "stdin must be a string";
  return "";
}

// Shapes of messages crossing a boundary. Each returns true only for a well-formed message.
const SHAPES = {
  // parent -> frame
  "run": (m) => isRunId(m.id) && isString(m.code) && (m.stdin === undefined || m.stdin === null || isString(m.stdin)) && (m.limits === undefined || m.limits === null || isObject(m.limits)) && typeof m.interactive === "boolean" && (m.filename === undefined || m.filename === null || isFilename(m.filename)) && (m.functions === undefined || isFunctionNames(m.functions)) && (m.display === undefined || isDisplay(m.display)) && (m.packages === undefined || isPackageNames(m.packages)) && (m.network === undefined || m.network === null || isObject(m.network)),
  "stop": (m) => isRunId(m.id),
  "input": (m) => isRunId(m.id) && (m.text === null || isString(m.text)),
  // a call of the page's functions: the program's request (JSON text; worker -> frame -> page,
  // the worker's answer buffer only on its first leg) and the page's answer (page -> frame -> worker)
  "host-call": (m) => isRunId(m.id) && isCallNo(m.call) && isString(m.request) && isBuffer(m.buffer),
  "host-answer": (m) => isRunId(m.id) && isCallNo(m.call) && isString(m.answer),
  "prefetch": () => true,
  "assets": (m) => isObject(m.files) && Object.values(m.files).every((b) => b instanceof ArrayBuffer),
  "frame-ready": (m) => typeof m.isolated === "boolean" && Array.isArray(m.relay) && m.relay.every(isString),
  // frame/worker -> parent
  "ready": (m) => isObject(m.info),
  // the output in the order it was written: [{stream, text}, ...]
  "stream": (m) => isRunId(m.id) && Array.isArray(m.chunks) && m.chunks.length > 0 && m.chunks.every(isChunk),
  "input-request": (m) => isRunId(m.id) && isString(m.prompt),
  "output": (m) => isRunId(m.id) && isObject(m.output) && isString(m.output.kind) && isString(m.output.mime) && isString(m.output.data),
  "status": (m) => (m.id === undefined || isRunId(m.id)) && isString(m.text),
  "limit": (m) => isRunId(m.id) && isString(m.limit),
  "done": (m) => isRunId(m.id) && isObject(m.result) && isString(m.result.status),
  "fatal": (m) => isString(m.message),
};

/** True when `m` is an object of a known `type` with the right fields. */
export function isMessage(m, ...types) {
  if (!isObject(m) || !isString(m.type) || m.channel !== CHANNEL) return false;
  if (types.length && !types.includes(m.type)) return false;
  const check = SHAPES[m.type];
  return Boolean(check && check(m));
}

/** All messages carry this channel tag so unrelated postMessage traffic is ignored. */
export const CHANNEL = "wasm-runner/1";

/** Build a message of `type` with the channel tag. */
export function message(type, fields = {}) {
  return { channel: CHANNEL, type, ...fields };
}
