// CodeMirror 6 editor for the playground and the embed element (bundled to dist/editor.js).
// Python habits: Tab indents by 4 spaces (Shift+Tab dedents), Enter keeps the indentation, and
// Escape then Tab leaves the editor (CodeMirror's tab-focus escape, documented in the label);
// Ctrl/Cmd+Enter runs. (@codemirror/commands and /language come with `codemirror`.)
// Lint while typing (`attachLint`): the findings of the lazily loaded ruff.js as CodeMirror
// diagnostics, in the gutter and underlined; Ctrl+Shift+M opens the list of them (CodeMirror's lint
// panel, which screen readers read), F8 moves to the next one.
import { EditorView, basicSetup } from "codemirror";
import { Compartment, EditorState, StateEffect, StateField } from "@codemirror/state";
import { linter, lintGutter } from "@codemirror/lint";
import { Decoration, keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { HighlightStyle, indentUnit, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";
import { python } from "@codemirror/lang-python";

// The failing part of a line, marked under an error's explanation (docs/explanations.md); an edit
// of the code takes the mark away.
const setMark = StateEffect.define();
const markTheme = EditorView.baseTheme({
  ".cm-explain-span": { textDecoration: "underline wavy #c00", textDecorationSkipInk: "none", backgroundColor: "#ffe3e3" },
  ".cm-explain-line": { backgroundColor: "#fff4f4" },
});
const markField = StateField.define({
  create: () => Decoration.none,
  update(marks, tr) {
    if (tr.docChanged) return Decoration.none;
    for (const effect of tr.effects) if (effect.is(setMark)) return effect.value;
    return marks;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** The decorations of `span` ({line, col, end_col}: 1-based line, 0-based columns) in `doc`. */
function spanMarks(doc, span) {
  if (!span || span.line < 1 || span.line > doc.lines) return Decoration.none;
  const line = doc.line(span.line);
  const from = line.from + Math.min(span.col, line.length);
  const to = line.from + Math.min(Math.max(span.end_col, span.col), line.length);
  const ranges = [Decoration.line({ class: "cm-explain-line" }).range(line.from)];
  // an empty span (a missing colon at the end of the line) marks the character before it
  if (to > from) ranges.push(Decoration.mark({ class: "cm-explain-span" }).range(from, to));
  else if (from > line.from) ranges.push(Decoration.mark({ class: "cm-explain-span" }).range(from - 1, from));
  return Decoration.set(ranges, true);
}

// CodeMirror's default colours, with the three that fall short of WCAG AA contrast (4.5:1 on the
// editor's background; axe-core's color-contrast rule in tests/browser/test_accessibility.py)
// darkened: escapes and f-string parts (#e40), type names (#085), invalid code (#f00). Being a
// full style, it replaces basicSetup's fallback one.
const readableHighlighting = HighlightStyle.define([
  { tag: t.meta, color: "#404740" },
  { tag: t.link, textDecoration: "underline" },
  { tag: t.heading, textDecoration: "underline", fontWeight: "bold" },
  { tag: t.emphasis, fontStyle: "italic" },
  { tag: t.strong, fontWeight: "bold" },
  { tag: t.strikethrough, textDecoration: "line-through" },
  { tag: t.keyword, color: "#708" },
  { tag: [t.atom, t.bool, t.url, t.contentSeparator, t.labelName], color: "#219" },
  { tag: [t.literal, t.inserted], color: "#164" },
  { tag: [t.string, t.deleted], color: "#a11" },
  { tag: [t.regexp, t.escape, t.special(t.string)], color: "#b83200" },
  { tag: t.definition(t.variableName), color: "#00f" },
  { tag: t.local(t.variableName), color: "#30a" },
  { tag: [t.typeName, t.namespace], color: "#00704a" },
  { tag: t.className, color: "#167" },
  { tag: [t.special(t.variableName), t.macroName], color: "#256" },
  { tag: t.definition(t.propertyName), color: "#00c" },
  { tag: t.comment, color: "#940" },
  { tag: t.invalid, color: "#c00" },
]);

// The rule's code under each problem in the lint panel, readable on the selected row too
// (CodeMirror dims it to 70% opacity: 3.2:1 on the selection's blue).
const readableLintPanel = EditorView.theme({ ".cm-diagnosticSource": { opacity: 1 } });

/**
 * Create an editor in `parent`. Returns {view, getCode(), setCode(text)}.
 * @param {HTMLElement} parent
 * @param {{doc?: string, readOnly?: boolean, label?: string, onRun?: () => void, onChange?: (code: string) => void, root?: ShadowRoot}} options
 */
export function createEditor(parent, { doc = "", readOnly = false, label = "Python code", onRun, onChange, root } = {}) {
  const lintSlot = new Compartment();
  const extensions = [
    lintSlot.of([]),
    keymap.of([
      { key: "Mod-Enter", run: () => { if (onRun) onRun(); return true; } },
    ]),
    keymap.of([indentWithTab]),
    basicSetup,
    python(),
    syntaxHighlighting(readableHighlighting),
    readableLintPanel,
    // what screen readers hear for the lint's list and marks
    EditorState.phrases.of({ Diagnostics: "Problems in the code", "No diagnostics": "No problems" }),
    indentUnit.of("    "),
    EditorState.tabSize.of(4),
    EditorView.lineWrapping,
    // tabindex: the scrolling area has keyboard access also when read-only (axe-core's
    // scrollable-region-focusable)
    EditorView.contentAttributes.of({ "aria-label": label, tabindex: "0" }),
    EditorState.readOnly.of(readOnly),
    EditorView.editable.of(!readOnly),
    markField,
    markTheme,
  ];
  if (onChange) {
    extensions.push(EditorView.updateListener.of((update) => {
      if (update.docChanged) onChange(update.state.doc.toString());
    }));
  }
  const view = new EditorView({ parent, root, state: EditorState.create({ doc, extensions }) });
  // Escape then Tab leaves the editor, also when that Escape closes a completion list (whose
  // keymap would otherwise take the Escape first): seen here, before CodeMirror's handlers.
  view.dom.addEventListener("keydown", (event) => {
    if (event.key === "Escape") view.setTabFocusMode(2000);
  }, true);
  return {
    view,
    focus: () => view.focus(),
    getCode: () => view.state.doc.toString(),
    /**
     * Mark the findings of `check(code)` (lint.js's finding objects) while the student types:
     * `delay` ms after the last change. `onFindings(findings)` hears each new set.
     */
    attachLint: (check, { delay = 100, onFindings } = {}) => view.dispatch({
      effects: lintSlot.reconfigure([
        linter((lintView) => {
          const findings = check(lintView.state.doc.toString());
          if (onFindings) onFindings(findings);
          return findings.map((finding) => toDiagnostic(lintView.state.doc, finding));
        }, { delay }),
        lintGutter(),
      ]),
    }),
    setCode: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    /** Mark the failing part of the code (an explanation's span), or clear the mark (null). */
    markSpan: (span) => {
      const marks = spanMarks(view.state.doc, span);
      const effects = [setMark.of(marks)];
      if (span && span.line >= 1 && span.line <= view.state.doc.lines) {
        effects.push(EditorView.scrollIntoView(view.state.doc.line(span.line).from, { y: "nearest" }));
      }
      view.dispatch({ effects });
    },
  };
}

// A position from a 1-based line and a 1-based column counted in characters (code points, as
// Ruff counts them): CodeMirror counts UTF-16 units. A position past the end is the end.
function offsetOf(doc, line, column) {
  if (line > doc.lines) return doc.length;
  const text = doc.line(line);
  let units = 0;
  let chars = 1;
  for (const char of text.text) {
    if (chars >= column) break;
    units += char.length;
    chars += 1;
  }
  return text.from + units;
}

function toDiagnostic(doc, finding) {
  const from = offsetOf(doc, finding.line, finding.column);
  const to = Math.max(from, offsetOf(doc, finding.end_line, finding.end_column));
  return { from, to, severity: finding.severity, source: finding.rule === "syntax" ? "syntax" : finding.rule,
    message: `${finding.title}: ${finding.message}` };
}
