// Bundle CodeMirror 6 into one ES module (dist/editor.js). Run by `npm run build` (setup does it).
import { build } from "esbuild";

await build({
  entryPoints: ["src/editor-entry.js"],
  outfile: "dist/editor.js",
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2022",
  legalComments: "eof",
  logLevel: "warning",
});
