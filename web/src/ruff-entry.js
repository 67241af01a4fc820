// The editor's linter, bundled to dist/ruff.js and loaded only when the editor asks for it (the
// page's first paint and first run never wait for it): Ruff's WebAssembly build (npm
// @astral-sh/ruff-wasm-web; its .wasm copied to dist/ruff.wasm by build.mjs) from this server's own
// origin, with the shared rule table (lint.js). No request leaves the origin.
import init, { PositionEncoding, Workspace } from "@astral-sh/ruff-wasm-web";
import { checkCode, findingsFrom, ruffSettings } from "./lint.js";

let started = null;

/**
 * Load Ruff once; resolves to {check(code, lang) -> findings, checkRuffOnly(code), version}. `style`
 * adds the style notes; `lang` (the page's or the element's) words the findings (English when the
 * table lacks it).
 * @param {{style?: boolean, wasmUrl?: string}} options
 */
export function startLinter({ style = false, wasmUrl = new URL("./ruff.wasm", import.meta.url).href } = {}) {
  started ??= init({ module_or_path: wasmUrl });
  return started.then(() => {
    // code points, as the `ruff` command counts columns (the server's findings are the same)
    const workspace = new Workspace(ruffSettings({ style }), PositionEncoding.Utf32);
    const check = (code, lang = null) => checkCode(workspace, code, lang);
    check("x = 1\n"); // the first check sets Ruff up: done here, not on the student's first pause
    // Ruff's findings without our own rules (lint-own.js): benchmarks/lint_bench.py's baseline
    const checkRuffOnly = (code) => findingsFrom(workspace.check(code));
    return { check, checkRuffOnly, version: Workspace.version() };
  });
}
