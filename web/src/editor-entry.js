// CodeMirror 6 editor for the playground and the embed element (bundled to dist/editor.js).
// Tab is left to the browser so keyboard users can leave the editor; Ctrl/Cmd+Enter runs.
import { EditorView, basicSetup } from "codemirror";
import { EditorState } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { python } from "@codemirror/lang-python";

/**
 * Create an editor in `parent`. Returns {view, getCode(), setCode(text)}.
 * @param {HTMLElement} parent
 * @param {{doc?: string, readOnly?: boolean, label?: string, onRun?: () => void, onChange?: (code: string) => void, root?: ShadowRoot}} options
 */
export function createEditor(parent, { doc = "", readOnly = false, label = "Python code", onRun, onChange, root } = {}) {
  const extensions = [
    keymap.of([{ key: "Mod-Enter", run: () => { if (onRun) onRun(); return true; } }]),
    basicSetup,
    python(),
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
  return {
    view,
    getCode: () => view.state.doc.toString(),
    setCode: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
  };
}
