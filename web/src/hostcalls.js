// The page's functions that a program in the browser tier may call (issue 24's host functions):
// `runner.expose({sensor: async (...args) => …})`, then in Python `from host import sensor`.
//
// A call travels worker → frame → page as the tagged JSON form of wasm_runner/codec.py (see
// plaindata.js); the page answers here, and only with functions it exposed itself: a name the page
// did not expose is refused whatever the program sent, and nothing the program sends is run as
// code. The frame enforces the run's limits on calls (host_calls, host_call_bytes, host_seconds).
//
// A page function gets the positional arguments, then (only when the program passed any) one
// object of the keyword arguments, as Pyodide passes keyword arguments to JavaScript functions:
// `sensor(3, unit="C")` calls `sensor(3, {unit: "C"})`. Its result (or what its promise
// resolves with) goes back as plain data; what it throws arrives as a Python exception with its
// message (a JavaScript TypeError as a TypeError, any other Error as `host.HostError` subclass
// named like it).
import { fromTagged, toTagged } from "./plaindata.js";

const NAME = /^[A-Za-z][A-Za-z0-9_]{0,99}$/;

/** A checked copy of `functions` ({name: function}) as a Map; throws TypeError on a bad entry. */
export function checkFunctions(functions) {
  const out = new Map();
  if (functions === undefined || functions === null) return out;
  const entries = functions instanceof Map ? [...functions] : Object.entries(functions);
  for (const [name, fn] of entries) {
    if (typeof name !== "string" || !NAME.test(name)) {
      throw new TypeError(`a function's name must be a Python name (letters, digits, _; not starting with _), got ${JSON.stringify(name)}`);
    }
    if (typeof fn !== "function") throw new TypeError(`${name} must be a function`);
    out.set(name, fn);
  }
  return out;
}

/** Add `functions` to the Map `exposed` (a name given again replaces it; `null` removes it). */
export function exposeInto(exposed, functions) {
  const entries = functions instanceof Map ? [...functions] : Object.entries(functions || {});
  const added = checkFunctions(new Map(entries.filter(([, fn]) => fn !== null)));
  for (const [name, fn] of entries) if (fn === null) exposed.delete(name);
  for (const [name, fn] of added) exposed.set(name, fn);
  return exposed;
}

function errorAnswer(type, message) {
  return JSON.stringify({ error: { type, bases: [], message: String(message), args: null } });
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/**
 * Answer one call (`request`: the JSON text the program sent, `{"op": "host", "name", "args",
 * "kwargs"}`) with the functions of `exposed` (a Map from checkFunctions). Resolves with the
 * answer's JSON text (`{"value": …}` or `{"error": {type, bases, message, args}}`); never rejects.
 */
export async function answerCall(exposed, request) {
  let call;
  try {
    call = JSON.parse(request);
  } catch {
    return errorAnswer("ValueError", "the call is not valid JSON");
  }
  if (!isPlainObject(call) || call.op !== "host" || typeof call.name !== "string") {
    return errorAnswer("ValueError", "the call is not a host function call");
  }
  const fn = exposed.get(call.name);
  if (!fn) return errorAnswer("NameError", `the page gave this run no function named ${JSON.stringify(call.name)}`);
  let args;
  let kwargs;
  try {
    args = fromTagged(call.args);
    kwargs = fromTagged(call.kwargs ?? {});
    if (!Array.isArray(args) || !isPlainObject(kwargs)) throw new TypeError("args must be a list and kwargs a dict of str keys");
  } catch (error) {
    return errorAnswer(error.name === "ValueError" ? "ValueError" : "TypeError", error.message);
  }
  let value;
  try {
    value = await (Object.keys(kwargs).length ? fn(...args, kwargs) : fn(...args));
  } catch (error) {
    const type = error instanceof Error && typeof error.name === "string" && /^\w{1,100}$/.test(error.name) ? error.name : "Error";
    return errorAnswer(type, error instanceof Error ? error.message : String(error));
  }
  try {
    return JSON.stringify({ value: toTagged(value) });
  } catch (error) {
    return errorAnswer(error.name === "ValueError" ? "ValueError" : "TypeError",
      `${call.name} returned what cannot cross: ${error.message}`);
  }
}
