// The lint's findings in plain words: Ruff's diagnostics (its WebAssembly build here, the `ruff`
// command on the server: wasm_runner/lint) turned into the same finding objects on both tiers,
// worded by the one shared table (lintrules.js, generated from wasm_runner/lint/rules.json).
// Pure functions: the browser (ruff-entry.js) and Node (tests) use them alike.
import { ownMarks } from "./lint-own.js";
import { LINT_RULES } from "./lintrules.js";

const QUOTED = /`([^`]*)`/;
const DEFAULT_LANGUAGE = "en";

/**
 * The table's language for an asked one (the page's or the element's `lang`: "de-AT" is "de");
 * English when the table has none, as explain.js picks the explanations' (server: lint_language).
 */
export function lintLanguage(asked) {
  if (typeof asked !== "string" || !asked.trim()) return DEFAULT_LANGUAGE;
  const base = asked.trim().toLowerCase().replace(/_/g, "-").split("-")[0];
  return LINT_RULES.languages.includes(base) ? base : DEFAULT_LANGUAGE;
}

// a rule's {title, text} in `lang` (a language of the table: lintLanguage's answer)
const wordsOf = (rule, lang) => (lang !== DEFAULT_LANGUAGE && rule[lang]) || rule;

/** Ruff's settings for the table's rules; `style` adds the style notes (exercises). */
export function ruffSettings({ style = false } = {}) {
  const rules = style ? [...LINT_RULES.beginner, ...LINT_RULES.style] : LINT_RULES.beginner;
  return {
    "line-length": LINT_RULES.ruff["line-length"],
    "target-version": LINT_RULES.ruff["target-version"],
    lint: { select: rules.map((rule) => rule.code) },
  };
}

function ruleFor(codeOrName) {
  for (const [kind, rules] of [["beginner", LINT_RULES.beginner], ["beginner", LINT_RULES.own], ["style", LINT_RULES.style], ["syntax", [LINT_RULES.syntax]]]) {
    const rule = rules.find((r) => r.code === codeOrName || r.name === codeOrName);
    if (rule) return { rule, kind };
  }
  return null;
}

/** The table's text for a finding: {name} = the first `quoted` part of Ruff's message, {detail} = that message. */
export function wording(text, ruffMessage) {
  const quoted = QUOTED.exec(ruffMessage);
  return text.replaceAll("{name}", quoted ? quoted[1] : "this name").replaceAll("{detail}", ruffMessage.replace(/\.+$/, ""));
}

/**
 * Findings from Ruff's diagnostics (the wasm build's `Workspace.check` names a rule by its name in
 * `code`, null for a syntax error): {rule, name, kind, severity, title, message, detail, line,
 * column, end_line, end_column}, 1-based, columns in characters (code points), sorted; worded
 * in `lang` (English when the table lacks it).
 */
export function findingsFrom(diagnostics, lang = DEFAULT_LANGUAGE) {
  const language = lintLanguage(lang);
  const found = [];
  for (const item of diagnostics) {
    const hit = ruleFor(item.code || "invalid-syntax");
    if (!hit) continue;
    const { rule, kind } = hit;
    const words = wordsOf(rule, language);
    found.push({
      rule: rule.code || "syntax", name: rule.name, kind, severity: rule.severity, title: words.title,
      message: wording(words.text, item.message), detail: item.message,
      line: item.start_location.row, column: item.start_location.column,
      end_line: item.end_location.row, end_column: item.end_location.column,
    });
  }
  return sorted(found);
}

function sorted(found) {
  const key = (f) => [f.line, f.column, f.rule];
  return found.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
  });
}

const RUFF_THROWN_AWAY = new Set(["B015", "B018"]);
const holds = (span, line, column) => (span.line < line || (span.line === line && span.column <= column))
  && (line < span.end_line || (line === span.end_line && column < span.end_column));

/**
 * Ruff's findings with our own rules' marks (lint-own.js) added, merged as the server's
 * wasm_runner/lint/own_rules.py does: nothing of ours on a syntax error; the program's last
 * top-level expression (shown like a notebook cell's value) marked by neither ours nor B015/B018;
 * no "thrown-away" mark where B015/B018 marks the statement already, nor in code that never runs.
 */
export function mergeOwnFindings(code, found, lang = DEFAULT_LANGUAGE) {
  const language = lintLanguage(lang);
  if (found.some((f) => f.kind === "syntax")) return found;
  const own = ownMarks(code);
  if (own === null) return found;
  const last = own.lastExpression;
  const kept = found.filter((f) => !(RUFF_THROWN_AWAY.has(f.rule) && last && holds(last, f.line, f.column)));
  const ruffMarked = kept.filter((f) => RUFF_THROWN_AWAY.has(f.rule));
  const neverRuns = own.marks.filter(([name]) => name === "unreachable-code").map(([, , span]) => span);
  for (const [name, detail, span] of own.marks) {
    if (name === "thrown-away-value" && (ruffMarked.some((f) => holds(span, f.line, f.column))
      || neverRuns.some((never) => holds(never, span.line, span.column)))) continue;
    const rule = LINT_RULES.own.find((r) => r.name === name);
    const words = wordsOf(rule, language);
    kept.push({
      rule: rule.code, name: rule.name, kind: "beginner", severity: rule.severity, title: words.title,
      message: wording(words.text, detail), detail, ...span,
    });
  }
  return sorted(kept);
}

/** All the findings for `code` from a Ruff `Workspace`, worded in `lang` (the page's and the tests' entry). */
export function checkCode(workspace, code, lang = DEFAULT_LANGUAGE) {
  return mergeOwnFindings(code, findingsFrom(workspace.check(code), lang), lang);
}
