// Exercise checks on the browser tier (Pyodide under Node, the page's controller and the page's
// checkInBrowser), for tests/exercises/test_explained_checks.py, which compares them with the
// server tier's. Reads {bundle, programs: [code], langs: [lang]} on stdin and prints, per
// program and language, the report's checks: [{name, passed, explanation}].
//     node tests/exercises/browser_checks.mjs < request.json
import { readFileSync } from "node:fs";
import { checkInBrowser } from "../../web/src/exercise.js";
import { createNodeController } from "../../web/src/node.js";

const { bundle, programs, langs } = JSON.parse(readFileSync(0, "utf8"));
const controller = createNodeController();
let id = 1;
const runner = { run: (code, { stdin = null, limits = null, filename = null } = {}) => controller.run({ id: id++, code, stdin, limits, filename }) };
const out = [];
try {
  await controller.prefetch();
  for (const code of programs) {
    const byLang = {};
    for (const lang of langs) {
      const report = await checkInBrowser(runner, bundle, code, { lang });
      byLang[lang] = report.checks.map((c) => ({ name: c.name, passed: c.passed, explanation: c.explanation ?? null }));
    }
    out.push(byLang);
  }
} finally {
  controller.dispose();
}
process.stdout.write(JSON.stringify(out));
