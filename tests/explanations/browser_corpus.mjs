// The explanation corpus (programs.json) run on the browser tier (Pyodide under Node, the
// page's controller), each program once, its explanation rendered in each language given (the
// first by the controller, as the page asks for it; the others from the result's id and params,
// as the page does when its language changes): prints {name: {status, lang: explanation}}.
// tests/explanations/test_tiers.py compares it with the server tier's.
//     node tests/explanations/browser_corpus.mjs en de
import { readFileSync } from "node:fs";
import { renderExplanation } from "../../web/src/explain.js";
import { createNodeController } from "../../web/src/node.js";

const programs = JSON.parse(readFileSync(new URL("./programs.json", import.meta.url), "utf8"));
const langs = process.argv.slice(2);
const controller = createNodeController();
const out = {};
let id = 1;
try {
  await controller.prefetch();
  for (const p of programs) {
    const result = await controller.run({
      id: id++, code: p.code, stdin: p.stdin ?? "", filename: "main.py", lang: langs[0],
      limits: p.limits || null,
    });
    out[p.name] = { status: result.status };
    for (const lang of langs) {
      out[p.name][lang] = result.explanation && renderExplanation(result.explanation, lang);
    }
  }
} finally {
  controller.dispose();
}
process.stdout.write(JSON.stringify(out));
