// The browser tier's lint in Node: Ruff's WebAssembly build (the npm package the page serves) and
// web/src/lint.js (with lint-own.js), the module the page's ruff.js bundles. Reads [[path, style, lang?], ...] as
// JSON on stdin, prints {path: {false: findings, true: findings with the style notes, "false:de": worded in German, ...}}
// (tests/lint/test_tiers_agree.py compares them with the server's).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const web = new URL("../../web/", import.meta.url);
const { initSync, Workspace, PositionEncoding } = await import(new URL("node_modules/@astral-sh/ruff-wasm-web/ruff_wasm.js", web));
const { checkCode, ruffSettings } = await import(new URL("src/lint.js", web));
initSync({ module: readFileSync(fileURLToPath(new URL("node_modules/@astral-sh/ruff-wasm-web/ruff_wasm_bg.wasm", web))) });

const jobs = JSON.parse(readFileSync(0, "utf8"));
const workspaces = {};
const out = {};
for (const [path, style, lang = null] of jobs) {
  workspaces[style] ??= new Workspace(ruffSettings({ style }), PositionEncoding.Utf32);
  (out[path] ??= {})[lang ? `${style}:${lang}` : style] = checkCode(workspaces[style], readFileSync(path, "utf8"), lang);
}
out.version = Workspace.version();
process.stdout.write(JSON.stringify(out));
