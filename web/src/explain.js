// Explanations of errors and limits for beginners (docs/explanations.md), rendered in the page
// from the message catalogues the server renders too (explain-catalogue.js, generated from
// wasm_runner/explanations/locale/*.po). The guest computes the language-neutral part
// ({id, params, span}: wasm_runner/guest/explain.py, on both tiers); the limits the controller
// decides are explained here, as wasm_runner/explanations/limits.py does on the server.
import { CATALOGUES } from "./explain-catalogue.js";

export const DEFAULT_LANGUAGE = "en";
export const LANGUAGES = Object.keys(CATALOGUES);
const FIELDS = ["title", "text", "hint"];
const PLACEHOLDER = /\{\{|\}\}|\{([a-z_]+)(?::([a-z]+))?\}/g;
const UNIT = "unit."; // catalogue entries that word a quantity ("unit.seconds": "{n} seconds"), not ids
const MAX_PARAMS = 12;
const MAX_TEXT = 200;

/** The catalogue's language for an asked one ("de-AT": "de"); English when there is none. */
export function languageOf(asked) {
  if (typeof asked !== "string" || !asked.trim()) return DEFAULT_LANGUAGE;
  const base = asked.trim().toLowerCase().replace(/_/g, "-").split("-")[0];
  return Object.hasOwn(CATALOGUES, base) ? base : DEFAULT_LANGUAGE;
}

/** A parameter as a number (limits come as whole numbers, or as text such as "0.5"), or null. */
function asNumber(value) {
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value !== "string" || !value.trim()) return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/**
 * `value` as a quantity of `kind` ("seconds", "bytes", "mb"), by the rule the run's end line
 * follows (wasm_runner/tiers.py: 2 minutes, 1 second, 1 MB, 64 KB, 10 bytes), worded by `words`
 * (a catalogue's unit.* entries); another kind, no number or no wording: as it is. The server's renderer
 * (wasm_runner/explanations/catalogue.py, `formatted`) follows the same rule.
 */
export function formatted(kind, value, words) {
  let n = asNumber(value);
  if (n === null || !["seconds", "bytes", "mb"].includes(kind)) return value === undefined || value === null ? "" : String(value);
  let unit = "mb";
  if (kind === "seconds") {
    if (n >= 120 && n % 60 === 0) [unit, n] = ["minutes", n / 60];
    else unit = n === 1 ? "second" : "seconds";
  } else if (kind === "bytes") {
    unit = n === 1 ? "byte" : "bytes";
    for (const [name, size] of [["mb", 1 << 20], ["kb", 1 << 10]]) {
      if (n >= size && n % size === 0) {
        [unit, n] = [name, n / size];
        break;
      }
    }
  }
  const wording = words ? words[UNIT + unit] : undefined;
  return typeof wording === "string" ? fill(wording, { n: String(n) }) : String(value);
}

/** `template` with {name} replaced by the parameter (missing: empty), {name:kind} by the
 * parameter as a quantity (`formatted`, in `words`; missing: the unit.no_<kind> wording, "the
 * time limit"), {{ and }} by braces. */
export function fill(template, params, words = null) {
  return template.replace(PLACEHOLDER, (match, name, kind) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    const value = params[name];
    if (value === undefined || value === null) {
      // a limit without a value: "the time limit", as the end line says
      const wording = kind && words ? words[`${UNIT}no_${kind}`] : undefined;
      return typeof wording === "string" ? wording : "";
    }
    return kind ? formatted(kind, value, words || {}) : String(value);
  });
}

function isInt(v) {
  return typeof v === "number" && Number.isInteger(v);
}

/** {id, params, span} from what the guest reported, or null when it is not a valid one. */
export function checkedExplanation(raw) {
  if (!raw || typeof raw !== "object" || typeof raw.id !== "string") return null;
  if (!Object.hasOwn(CATALOGUES[DEFAULT_LANGUAGE], `${raw.id}.title`)) return null;
  const params = {};
  if (raw.params && typeof raw.params === "object") {
    for (const [key, value] of Object.entries(raw.params).slice(0, MAX_PARAMS)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]{0,39}$/.test(key)) continue;
      if (isInt(value) && Math.abs(value) < 2 ** 53) params[key] = value;
      else if (typeof value === "string") params[key] = value.slice(0, MAX_TEXT);
    }
  }
  let span = null;
  const s = raw.span;
  if (s && typeof s === "object" && [s.line, s.col, s.end_col].every((v) => isInt(v) && v >= 0 && v < 2 ** 31)
      && s.line >= 1 && s.end_col >= s.col) {
    span = { line: s.line, col: s.col, end_col: s.end_col };
  }
  return { id: raw.id, params, span };
}

const given = (value) => typeof value === "number" && Number.isFinite(value);

/** A limit's value as a parameter ({} when the run had none: the text then says "the time limit"). */
function quantity(name, value, whole = false) {
  if (!given(value)) return {};
  return { [name]: whole ? Math.trunc(value) : Number.isInteger(value) ? value : String(value) };
}

/** {id, params, span} for a run that `status`/`limit` ended, or null when no limit stopped it. */
export function explanationForLimit(status, limit, limits) {
  const l = limits || {};
  if (status === "timeout" && limit === "input_wait") return { id: "limit_input_wait", params: quantity("seconds", l.input_wait_seconds), span: null };
  if (status === "timeout") return { id: "limit_timeout", params: quantity("seconds", l.wall_seconds), span: null };
  if (status === "cpu_limit") return { id: "limit_cpu", params: quantity("seconds", l.cpu_seconds), span: null };
  if (status === "memory_limit") return { id: "limit_memory", params: quantity("megabytes", l.memory_mb, true), span: null };
  if (status === "output_limit") return { id: "limit_output", params: quantity("bytes", l.stdout_bytes, true), span: null };
  if (status === "disk_limit") return { id: "limit_disk", params: {}, span: null };
  if (status === "error" && limit === "stack") return { id: "recursion", params: {}, span: null };
  return null;
}

/** A checked explanation rendered in `lang`: {id, title, text, hint, span, params, lang}. */
export function renderExplanation(raw, lang) {
  const code = languageOf(lang);
  const ours = CATALOGUES[code];
  const english = CATALOGUES[DEFAULT_LANGUAGE];
  const words = { ...english, ...ours };
  const out = { id: raw.id };
  for (const part of FIELDS) {
    const key = `${raw.id}.${part}`;
    out[part] = fill(ours[key] || english[key] || "", raw.params || {}, words);
  }
  out.span = raw.span || null;
  out.params = { ...(raw.params || {}) };
  out.lang = code;
  return out;
}

/** A result's explanation as the server gives it: the guest's for an error, the limit's for a limit. */
export function explainResult(result, guestRaw, limits, lang) {
  let raw = null;
  if (result.status === "error" && !result.limit) raw = checkedExplanation(guestRaw);
  if (!raw) raw = explanationForLimit(result.status, result.limit, limits);
  return raw ? renderExplanation(raw, lang) : null;
}
