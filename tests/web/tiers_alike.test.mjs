// The browser tier runs a program as the server's runner does (the guest package's program.py):
// the shared probes of tests/guest/tiers_alike.json (tests/guest/test_program.py runs them on the
// server tier), then what only the browser has (top-level await) and its `display` option's checks.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { createNodeController } from "../../web/src/node.js";
import { BOOTSTRAP_PY } from "../../web/src/bootstrap.py.js";
import { PLOT_STANDIN } from "./plot_standin.mjs";

const { probes } = JSON.parse(readFileSync(new URL("../guest/tiers_alike.json", import.meta.url), "utf8"));
const BROWSER_PY = readFileSync(new URL("../../wasm_runner/guest/browser.py", import.meta.url), "utf8");

const BUNDLE = "application/vnd.wasm-runner.bundle+json"; // a MIME bundle (wasm_runner/guest/rich.py)
const NOTHING_WRITTEN = { stdout: 0, stderr: 0 }; // an output's place when nothing was printed before it
let controller;
let nextId = 1;

function run(code, options = {}) {
  return controller.run({ id: nextId++, code, ...options });
}

function check(result, expected, where) {
  assert.equal(result.status, expected.status, `${where}: ${result.message} ${result.stderr}`);
  assert.equal(result.exit_code, expected.exit_code, where);
  assert.equal(result.stdout, expected.stdout, where);
  const outputs = result.outputs.map((o) => [o.kind, o.mime, o.data]);
  assert.equal(outputs.length, expected.outputs.length, `${where}: ${JSON.stringify(outputs).slice(0, 300)}`);
  outputs.forEach((got, i) => {
    const want = expected.outputs[i];
    assert.deepEqual(got.slice(0, 2), want.slice(0, 2), where);
    if (want[2] !== null) assert.equal(got[2], want[2], where);
  });
  for (const text of expected.stderr_has || []) assert.ok(result.stderr.includes(text), `${where}: ${result.stderr}`);
  if (expected.frames !== undefined) assert.equal(result.stderr.split('File "').length - 1, expected.frames, `${where}: ${result.stderr}`);
  if (expected.status === "ok") assert.equal(result.stderr, "", where);
}

before(async () => {
  controller = createNodeController();
  await controller.prefetch();
});

after(() => controller.dispose());

test("bootstrap.py.js is guest/browser.py, generated (no hand-written Python in JS)", () => {
  assert.equal(BOOTSTRAP_PY, BROWSER_PY);
});

describe("the shared probes, as on the server tier", () => {
  for (const probe of probes) {
    test(probe.name, async () => {
      for (const [i, r] of probe.runs.entries()) {
        const code = r.plot ? `${PLOT_STANDIN}\n${r.code}` : r.code;
        const result = await run(code, { display: r.display, filename: r.filename });
        check(result, r, `${probe.name} (run ${i + 1})`);
      }
    });
  }
});

describe("the browser's own", () => {
  test("without a display option a run shows figures, not the last expression (the page's default on both tiers)", async () => {
    const result = await run("x = 6 * 7\nx");
    assert.equal(result.status, "ok");
    assert.deepEqual(result.outputs, []);
    const plot = await run(`${PLOT_STANDIN}\nimport matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])`);
    assert.deepEqual(plot.outputs.map((o) => o.mime), ["image/png"]);
  });

  test("top-level await, in the body and in the last expression shown", async () => {
    const body = await run("import asyncio\nawait asyncio.sleep(0)\n6 * 7", { display: true });
    assert.equal(body.status, "ok", body.stderr);
    assert.deepEqual(body.outputs, [{ kind: "result", mime: BUNDLE, data: '{"data":{"text/plain":"42"},"metadata":{}}', at: NOTHING_WRITTEN }]);
    const tail = await run("async def f():\n    return 'awaited'\n\nawait f()", { display: true });
    assert.equal(tail.status, "ok", tail.stderr);
    assert.deepEqual(tail.outputs, [{ kind: "result", mime: BUNDLE, data: `{"data":{"text/plain":"'awaited'"},"metadata":{}}`, at: NOTHING_WRITTEN }]);
    const hidden = await run("async def f():\n    return 'awaited'\n\nawait f()", { display: "figures" });
    assert.deepEqual(hidden.outputs, []);
  });

  test("a display other than true, false or \"figures\" is refused, not run", async () => {
    const result = await run("print('ran')", { display: "yes" });
    assert.equal(result.status, "invalid_input");
    assert.match(result.message, /display/);
    assert.equal(result.stdout, "");
  });
});
