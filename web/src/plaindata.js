// Plain data between Python and the page: the JavaScript side of the tagged JSON form that
// wasm_runner/codec.py defines (the one form both tiers use for host functions; see its table).
// The page's functions (runner.expose) get their arguments decoded from it and their results
// encoded into it. Decoding builds only plain JavaScript values; encoding refuses anything that
// is not plain data with a TypeError naming its type, and bounds depth and count as codec.py does.
//
//   Python            JavaScript (decoded)          JavaScript (encoded from)
//   None              null                          null, undefined
//   bool              boolean                       boolean
//   int               number (BigInt beyond 2**53)  number (integral), BigInt
//   float             number (NaN, ±Infinity too)   number
//   complex           Complex {real, imag}          Complex
//   str               string                        string
//   bytes             Uint8Array                    Uint8Array, ArrayBuffer
//   list, tuple       Array                         Array (a list)
//   set, frozenset    Set                           Set (a set)
//   dict              plain object (str keys), Map  plain object, Map

export const MAX_DEPTH = 100;
export const MAX_ITEMS = 1_000_000;
const SAFE = Number.MAX_SAFE_INTEGER;

/** A Python complex number. */
export class Complex {
  constructor(real, imag) {
    this.real = Number(real);
    this.imag = Number(imag);
    Object.freeze(this);
  }
}

/** A value that is not plain data, or is too deep or too big. */
export class PlainDataError extends Error {
  constructor(message) {
    super(message);
    this.name = "ValueError";
  }
}

function typeName(value) {
  if (value === null) return "null";
  const t = typeof value;
  if (t !== "object") return t;
  const proto = Object.getPrototypeOf(value);
  const ctor = proto && Object.prototype.hasOwnProperty.call(proto, "constructor") ? proto.constructor : null;
  return (ctor && typeof ctor.name === "string" && ctor.name) || "object";
}

function refuse(value) {
  return new TypeError(`a value of type ${typeName(value)} cannot cross: only null, boolean, number, bigint, string, `
    + "Uint8Array, ArrayBuffer, Array, Set, Map, Complex and plain objects do");
}

function isPlainObject(value) {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function floatTag(x) {
  if (Number.isFinite(x)) return x;
  return { $float: Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf" };
}

function base64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function unbase64(text) {
  let binary;
  try {
    binary = atob(text);
  } catch {
    throw new PlainDataError("$bytes must hold base64 text");
  }
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** `value` as the tagged JSON form (a JSON-ready value). */
export function toTagged(value, { maxDepth = MAX_DEPTH, maxItems = MAX_ITEMS } = {}) {
  let items = 0;
  const path = new Set();
  const count = () => {
    items += 1;
    if (items > maxItems) throw new PlainDataError(`more than ${maxItems} values`);
  };
  const enter = (v, depth) => {
    if (depth >= maxDepth) throw new PlainDataError(`nested deeper than ${maxDepth} levels`);
    if (path.has(v)) throw new PlainDataError(`a value that contains itself (a ${typeName(v)} in a cycle)`);
    path.add(v);
  };
  const key = (k, depth) => {
    if (k !== null && typeof k === "object" && !(k instanceof Complex) && !(k instanceof Uint8Array)) throw refuse(k);
    return encode(k, depth);
  };
  const encode = (v, depth) => {
    count();
    if (v === null || v === undefined) return null;
    switch (typeof v) {
      case "boolean":
      case "string":
        return v;
      case "number":
        return floatTag(v);
      case "bigint":
        if (v >= -BigInt(SAFE) && v <= BigInt(SAFE)) return Number(v);
        return { $int: v < 0n ? `-0x${(-v).toString(16)}` : `0x${v.toString(16)}` };
      case "object":
        break;
      default:
        throw refuse(v);
    }
    if (v instanceof Complex) return { $complex: [floatTag(v.real), floatTag(v.imag)] };
    if (v instanceof Uint8Array) return { $bytes: base64(v) };
    if (v instanceof ArrayBuffer) return { $bytes: base64(new Uint8Array(v)) };
    const container = Array.isArray(v) || v instanceof Set || v instanceof Map || isPlainObject(v);
    if (!container) throw refuse(v);
    enter(v, depth);
    try {
      if (Array.isArray(v)) return Array.from(v, (x) => encode(x, depth + 1));
      if (v instanceof Set) return { $set: Array.from(v, (x) => encode(x, depth + 1)) };
      if (v instanceof Map) return { $dict: Array.from(v, ([k, x]) => [key(k, depth + 1), encode(x, depth + 1)]) };
      const entries = Object.entries(v);
      if (entries.every(([k]) => !k.startsWith("$"))) {
        return Object.fromEntries(entries.map(([k, x]) => [k, encode(x, depth + 1)]));
      }
      return { $dict: entries.map(([k, x]) => [k, encode(x, depth + 1)]) };
    } finally {
      path.delete(v);
    }
  };
  return encode(value, 0);
}

function number(v) {
  if (typeof v === "number") return v;
  if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1) {
    const f = v.$float;
    if (f === "nan") return NaN;
    if (f === "inf") return Infinity;
    if (f === "-inf") return -Infinity;
  }
  throw new PlainDataError("a float must be a number or a $float tag");
}

/** The JavaScript value the tagged JSON form `data` stands for. */
export function fromTagged(data, { maxDepth = MAX_DEPTH, maxItems = MAX_ITEMS } = {}) {
  let items = 0;
  const decode = (d, depth) => {
    items += 1;
    if (items > maxItems) throw new PlainDataError(`more than ${maxItems} values`);
    if (depth > maxDepth) throw new PlainDataError(`nested deeper than ${maxDepth} levels`);
    if (d === null || typeof d === "boolean" || typeof d === "string" || typeof d === "number") return d;
    if (Array.isArray(d)) return d.map((x) => decode(x, depth + 1));
    if (typeof d !== "object") throw new PlainDataError(`unexpected ${typeof d} in encoded data`);
    const keys = Object.keys(d);
    const tags = keys.filter((k) => k.startsWith("$"));
    if (!tags.length) return Object.fromEntries(keys.map((k) => [k, decode(d[k], depth + 1)]));
    if (keys.length !== 1) throw new PlainDataError("a tag object must have exactly one key");
    const tag = tags[0];
    const body = d[tag];
    if (["$tuple", "$set", "$frozenset", "$dict", "$complex"].includes(tag) && !Array.isArray(body)) {
      throw new PlainDataError(`${tag} must hold an array`);
    }
    switch (tag) {
      case "$tuple":
        return body.map((x) => decode(x, depth + 1));
      case "$set":
      case "$frozenset":
        return new Set(body.map((x) => decode(x, depth + 1)));
      case "$dict": {
        const out = new Map();
        for (const pair of body) {
          if (!Array.isArray(pair) || pair.length !== 2) throw new PlainDataError("$dict must hold [key, value] pairs");
          out.set(decode(pair[0], depth + 1), decode(pair[1], depth + 1));
        }
        return out;
      }
      case "$bytes":
        if (typeof body !== "string") throw new PlainDataError("$bytes must hold base64 text");
        return unbase64(body);
      case "$float":
        return number(d);
      case "$int": {
        if (typeof body !== "string" || !/^-?0x[0-9a-f]+$/i.test(body)) throw new PlainDataError("$int must hold hexadecimal text");
        return body.startsWith("-") ? -BigInt(body.slice(1)) : BigInt(body);
      }
      case "$complex":
        if (body.length !== 2) throw new PlainDataError("$complex must hold [real, imag]");
        return new Complex(number(body[0]), number(body[1]));
      default:
        throw new PlainDataError(`unknown tag ${JSON.stringify(tag.slice(0, 40))}`);
    }
  };
  return decode(data, 0);
}
