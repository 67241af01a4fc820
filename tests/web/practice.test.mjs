// Exercises checked in the browser tier, with real Pyodide in Node: the page's checking runs the
// server's own judging (wasm_runner/exercises/judging.py, through practice.py, generated into
// web/src/checking.js); no checking logic is written in JavaScript.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { checkInBrowser } from "../../web/src/exercise.js";
import { createNodeController } from "../../web/src/node.js";

const ROOT = new URL("../../", import.meta.url);
const PYTHON = process.env.WASM_RUNNER_PYTHON || new URL(".venv/bin/python", ROOT).pathname;

/** The browser bundle of an exercise folder, as `wasm-runner exercise export` writes it. */
function exportBundle(folder) {
  const out = execFileSync(PYTHON, ["-m", "wasm_runner.cli", "exercise", "export", new URL(folder, ROOT).pathname], { cwd: ROOT.pathname });
  return JSON.parse(out);
}

let controller;
let nextId = 1;
const runner = { // what checkInBrowser needs of client.js's Runner: run(code, options) in the browser tier
  run: (code, { stdin = null, limits = null, filename = null } = {}) => controller.run({ id: nextId++, code, stdin, limits, filename }),
};

before(async () => {
  controller = createNodeController({ onEvent: () => {} });
  await controller.prefetch();
});

after(() => controller.dispose());

describe("the browser tier checks with the server's Python judging", () => {
  const add = exportBundle("examples/exercises/add-numbers");
  const solution = readFileSync(new URL("examples/exercises/add-numbers/solution.py", ROOT), "utf8");
  const starter = readFileSync(new URL("examples/exercises/add-numbers/starter.py", ROOT), "utf8");

  test("the reference solution passes every check of the shipped example", async () => {
    const seen = [];
    const report = await checkInBrowser(runner, add, solution, { onCheck: (c) => seen.push(c.name) });
    assert.equal(report.summary, "7 of 7 checks passed — well done!");
    assert.deepEqual(seen, report.checks.map((c) => c.name));
    assert.deepEqual(report.checks.map((c) => [c.kind, c.hidden]), [
      ["io", false], ["io", false], ["io", true], ["test", false], ["test", false], ["test", true], ["test", true]]);
    assert.ok(report.checks.every((c) => c.passed && c.status === "ok"));
  });

  test("the starter fails with the server's messages", async () => {
    const report = await checkInBrowser(runner, add, starter);
    assert.equal(report.summary, "0 of 7 checks passed.");
    const io = report.checks[0];
    assert.equal(io.name, "two small numbers");
    assert.equal(io.message, "Input:\n    2\n    3\nExpected output:\n    5\nYour output:\n    None\nFirst difference: line 1: expected '5', got 'None'.");
    const test1 = report.checks[3];
    assert.equal(test1.name, "test_small");
    assert.match(test1.message, /assert add\(2, 3\) == 5/);
    assert.match(test1.message, /None/);
  });

  test("a wrong float output names the tolerance; a stuck program names its limit", async () => {
    const mean = exportBundle("tests/exercises/mean");
    const code = "def mean(v):\n    if len(v) == 1:\n        while True:\n            pass\n    return round(sum(v) / len(v), 2)\n"
      + "if __name__ == '__main__':\n    print(mean([float(x) for x in input().split()]))\n";
    const report = await checkInBrowser(runner, mean, code);
    const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
    assert.equal(byName["three numbers"].passed, false);
    assert.match(byName["three numbers"].message, /First difference: expected '2\.3333333', got '2\.33' \(tolerance 1e-06\)\.$/);
    const stuck = byName.test_mean_of_one;
    assert.equal(stuck.status, "timeout");
    assert.equal(stuck.limit, "wall");
    assert.match(stuck.message, /Is there an infinite loop/);
    assert.equal(byName.test_mean_of_two.passed, true);
  });
});

describe("no checking logic in JavaScript", () => {
  test("web/src has no copy of compare, judge, summarize or repr", () => {
    const src = new URL("../../web/src/", import.meta.url);
    const generated = new Set(["checking.js", "pylib.js"]); // Python sources, as strings
    const found = [];
    for (const name of readdirSync(src).filter((n) => n.endsWith(".js") && !generated.has(n))) {
      const text = readFileSync(new URL(name, src), "utf8");
      for (const sign of [/compareOutput|judgeCheck|pyRepr|findRecord|planChecks/, /function summari[sz]e/, /tolerance/,
        /Expected output|First difference|checks passed|did not report back|Output matches/, /LIMIT_HINT|infinite loop/]) {
        if (sign.test(text)) found.push(`${name}: ${sign}`);
      }
    }
    assert.deepEqual(found, []);
  });
});
