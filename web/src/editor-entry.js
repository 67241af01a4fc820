// CodeMirror 6 editor for the playground and the embed element (bundled to dist/editor.js).
// Python habits: Tab indents by 4 spaces (Shift+Tab dedents), Enter keeps the indentation, and
// Escape then Tab leaves the editor (CodeMirror's tab-focus escape, documented in the label);
// Ctrl/Cmd+Enter runs. (@codemirror/commands and /language come with `codemirror`.)
import { EditorView, basicSetup } from "codemirror";
import { EditorState, StateEffect, StateField } from "@codemirror/state";
import { Decoration, keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { indentUnit } from "@codemirror/language";
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

/**
 * Create an editor in `parent`. Returns {view, getCode(), setCode(text)}.
 * @param {HTMLElement} parent
 * @param {{doc?: string, readOnly?: boolean, label?: string, onRun?: () => void, onChange?: (code: string) => void, root?: ShadowRoot}} options
 */
export function createEditor(parent, { doc = "", readOnly = false, label = "Python code", onRun, onChange, root } = {}) {
  const extensions = [
    keymap.of([
      { key: "Mod-Enter", run: () => { if (onRun) onRun(); return true; } },
    ]),
    keymap.of([indentWithTab]),
    basicSetup,
    python(),
    indentUnit.of("    "),
    EditorState.tabSize.of(4),
    EditorView.lineWrapping,
    EditorView.contentAttributes.of({ "aria-label": label }),
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
