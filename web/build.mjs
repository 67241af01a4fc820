// Bundle with esbuild (run by `npm run build`; setup does it):
// - dist/editor.js: CodeMirror 6 as one ES module;
// - dist/rich.js: DOMPurify and KaTeX for a run's rich outputs (render.js loads it when needed),
//   and dist/katex.css with KaTeX's fonts beside it (woff2 only; the assets are one flat folder);
// - dist/frame.bundle.js and dist/worker.bundle.js: the sandbox frame and its worker, each one
//   file. The frame's opaque origin has no HTTP cache, so every module it imports is fetched
//   again on every page load; one file instead of a chain of imports saves round trips before
//   Python can start (docs/performance.md);
// - dist/ruff.js and dist/ruff.wasm: the editor's lint (Ruff's WebAssembly build), loaded lazily.
//   The unbundled src/ modules stay the source of truth
//   (Node tests import them; the server falls back to them when the bundles are missing).
import { copyFile, mkdir } from "node:fs/promises";
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";

const common = { bundle: true, format: "esm", target: "es2022", legalComments: "eof", logLevel: "warning" };
await Promise.all([
  build({ ...common, entryPoints: ["src/editor-entry.js"], outfile: "dist/editor.js", minify: true }),
  build({ ...common, entryPoints: ["src/rich-entry.js"], outfile: "dist/rich.js", minify: true }),
  build({ ...common, entryPoints: ["src/frame.js"], outfile: "dist/frame.bundle.js" }),
  build({ ...common, entryPoints: ["src/worker.js"], outfile: "dist/worker.bundle.js" }),
  build({ ...common, entryPoints: ["src/ruff-entry.js"], outfile: "dist/ruff.js", minify: true }),
]);
await mkdir("dist", { recursive: true });
await copyFile("node_modules/@astral-sh/ruff-wasm-web/ruff_wasm_bg.wasm", "dist/ruff.wasm");

// KaTeX's stylesheet, its fonts in the same folder (url(fonts/X.woff2) -> url(X.woff2))
const katexDist = "node_modules/katex/dist";
const css = readFileSync(`${katexDist}/katex.min.css`, "utf8")
  .replace(/,url\(fonts\/[^)]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)/g, "")
  .replace(/url\(fonts\//g, "url(");
writeFileSync("dist/katex.css", css);
for (const name of readdirSync(`${katexDist}/fonts`)) {
  if (name.endsWith(".woff2")) copyFileSync(`${katexDist}/fonts/${name}`, `dist/${name}`);
}
