// CodeMirror 6 editor for the playground and the embed element (bundled to dist/editor.js).
// Python habits: Tab indents by 4 spaces (Shift+Tab dedents), Enter keeps the indentation, and
// Escape then Tab leaves the editor (CodeMirror's tab-focus escape, documented in the label);
// Ctrl/Cmd+Enter runs. (@codemirror/commands and /language come with `codemirror`.)
import { EditorView, basicSetup } from "codemirror";
import { EditorState } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { indentUnit } from "@codemirror/language";
import { python } from "@codemirror/lang-python";

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
  };
}
