// The page's functions called from Python in the browser tier (issue 24, item 4): real Pyodide
// in Node worker threads, the real controller (the frame's checks and limits) and the page side
// of hostcalls.js answering, as client.js does in a browser.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { answerCall, checkFunctions } from "../../web/src/hostcalls.js";
import { Complex, fromTagged, toTagged } from "../../web/src/plaindata.js";
import { createNodeController } from "../../web/src/node.js";

let controller;
let nextId = 1;
let exposed = new Map(); // what the "page" answers with, for the run in progress
const pageCalls = []; // names the page's functions were called as

function run(code, { functions = {}, limits = null, give = null } = {}) {
  exposed = checkFunctions(functions);
  const names = give || [...exposed.keys()];
  return controller.run({ id: nextId++, code, limits, functions: names });
}

before(async () => {
  controller = createNodeController({
    onEvent: (event) => {
      if (event.type !== "host-call") return;
      answerCall(exposed, event.request).then((answer) => controller.hostAnswer(event.id, event.call, answer));
    },
  });
  await controller.prefetch();
});

after(() => controller.dispose());

const record = (name, fn) => (...args) => {
  pageCalls.push(name);
  return fn(...args);
};

describe("plain data between Python and the page", () => {
  test("the tagged form round-trips JavaScript values", () => {
    const value = [null, true, 7, 2 ** 60 * 1, 12345678901234567890n, -3.5, NaN, Infinity, new Complex(1, -2), "é",
      new Uint8Array([0, 255]), new Set([1, 2]), new Map([[1, "a"], ["$x", 2]]), { a: [1, { b: null }] }];
    const back = fromTagged(JSON.parse(JSON.stringify(toTagged(value))));
    assert.equal(back[4], 12345678901234567890n);
    assert.ok(Number.isNaN(back[6]));
    assert.deepEqual(back[8], new Complex(1, -2));
    assert.deepEqual([...back[10]], [0, 255]);
    assert.deepEqual([...back[12]], [[1, "a"], ["$x", 2]]);
    assert.deepEqual(back[13], { a: [1, { b: null }] });
  });

  test("what is not plain data is refused, naming its type", () => {
    assert.throws(() => toTagged({ when: new Date(0) }), /a value of type Date cannot cross/);
    assert.throws(() => toTagged([() => 1]), /a value of type function cannot cross/);
    const cycle = [];
    cycle.push(cycle);
    assert.throws(() => toTagged(cycle), /contains itself/);
    let deep = [];
    for (let i = 0; i < 150; i++) deep = [deep];
    assert.throws(() => toTagged(deep), /nested deeper than 100 levels/);
  });
});

describe("calls", () => {
  test("positional and keyword arguments, results of every plain type, async functions", async () => {
    const result = await run(`
from host import sensor, echo
print(sensor(3, unit="C"))
value = echo(None, True, 2**70, -1.5, float("nan"), 1-2j, "é", b"\\x00\\xff", [1, (2, 3)], {"a": {1: "x"}}, {4, 5})
print(repr(value))
import host
print(host.__all__)
`, {
      functions: {
        sensor: async (n, kwargs) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          return { n, unit: kwargs.unit, reading: 21.5 };
        },
        echo: (...args) => args,
      },
    });
    assert.equal(result.status, "ok", result.stderr);
    const lines = result.stdout.split("\n");
    assert.equal(lines[0], "{'n': 3, 'unit': 'C', 'reading': 21.5}");
    assert.equal(lines[1], "[None, True, 1180591620717411303424, -1.5, nan, (1-2j), 'é', b'\\x00\\xff', [1, [2, 3]], {'a': {1: 'x'}}, {4, 5}]");
    assert.equal(lines[2], "['echo', 'sensor']");
  });

  test("a page function's exception arrives as a Python exception with its message", async () => {
    const result = await run(`
from host import broken, picky
try:
    broken()
except Exception as e:
    print(type(e).__name__, "|", e)
try:
    picky(1)
except TypeError as e:
    print("TypeError", "|", e)
broken()
`, {
      functions: {
        broken: () => { throw new Error("no sensor on this page"); },
        picky: () => { throw new TypeError("picky wants a string"); },
      },
    });
    assert.equal(result.status, "error");
    assert.match(result.stdout, /^Error \| no sensor on this page\nTypeError \| picky wants a string\n$/);
    assert.match(result.stderr, /host\.Error: no sensor on this page\n$/);
    assert.doesNotMatch(result.stderr, /wasm-runner|hostcalls|at answerCall/); // never the page's stack
  });

  test("arguments and results that are not plain data are refused with a TypeError naming the type", async () => {
    pageCalls.length = 0;
    const result = await run(`
from host import store, when
class Point: pass
try:
    store(Point())
except TypeError as e:
    print("args:", e)
try:
    when()
except TypeError as e:
    print("result:", e)
`, { functions: { store: record("store", () => null), when: () => new Date(0) } });
    assert.equal(result.status, "ok", result.stderr);
    assert.match(result.stdout, /^args: a value of type (__main__\.)?Point cannot cross/m);
    assert.match(result.stdout, /^result: when returned what cannot cross: a value of type Date cannot cross/m);
    assert.deepEqual(pageCalls, []); // the refused call never reached the page
  });

  test("a name the page did not expose cannot be reached, even forged past the host module", async () => {
    pageCalls.length = 0;
    // the page has a function named secret, but gave this run only `visible`
    const page = { visible: () => 1, secret: record("secret", () => "the page's secret") };
    exposed = checkFunctions({ visible: page.visible });
    const result = await controller.run({
      id: nextId++,
      functions: ["visible"],
      code: `
import host
try:
    host.secret
except AttributeError as e:
    print("attr:", e)
import _wasm_runner_guest.host as guest_host
try:
    guest_host._call("secret", (), {})
except Exception as e:
    print("forged:", type(e).__name__, e)
import _wasm_runner_host
print("raw:", _wasm_runner_host.host_call_blocking('{"op": "host", "name": "secret", "args": [], "kwargs": {}}'))
`,
    });
    assert.equal(result.status, "ok", result.stderr);
    assert.match(result.stdout, /^attr: .*no function named 'secret'/m);
    assert.match(result.stdout, /^forged: NameError the page gave this run no function named "secret"$/m);
    assert.match(result.stdout, /^raw: .*"NameError"/m);
    assert.deepEqual(pageCalls, []);
  });

  test("a run the page gave no functions has no host module", async () => {
    const result = await run("import host");
    assert.equal(result.status, "error");
    assert.match(result.stderr, /ModuleNotFoundError: No module named 'host'/);
  });

  test("a thousand calls in one run", async () => {
    let count = 0;
    const result = await run(`
from host import tick
total = 0
for i in range(1000):
    total += tick(i)
print(total)
`, { functions: { tick: (i) => { count += 1; return i * 2; } } });
    assert.equal(result.status, "ok", result.stderr);
    assert.equal(result.stdout, `${999 * 1000}\n`);
    assert.equal(count, 1000);
  });
});

describe("limits", () => {
  test("calls per run: the run ends with host_calls_limit, and the next run works", async () => {
    const result = await run("from host import f\nfor i in range(10):\n    print(f(i))\n", {
      functions: { f: (i) => i }, limits: { host_calls: 3 },
    });
    assert.equal(result.status, "host_calls_limit");
    assert.equal(result.limit, "host_calls");
    assert.equal(result.stdout, "0\n1\n2\n");
    const next = await run("print('unharmed')");
    assert.equal(next.status, "ok");
    assert.equal(next.stdout, "unharmed\n");
  });

  test("bytes per call, both ways: host_bytes_limit", async () => {
    const big = await run("from host import f\nf('x' * 5000)\nprint('not reached')", {
      functions: { f: () => 1 }, limits: { host_call_bytes: 2048 },
    });
    assert.equal(big.status, "host_bytes_limit");
    assert.equal(big.limit, "host_bytes");
    assert.doesNotMatch(big.stdout, /not reached/);
    const answer = await run("from host import g\ng()\nprint('not reached')", {
      functions: { g: () => "y".repeat(5000) }, limits: { host_call_bytes: 2048 },
    });
    assert.equal(answer.status, "host_bytes_limit");
    assert.doesNotMatch(answer.stdout, /not reached/);
  });

  test("time inside the page's functions: host_time_limit", async () => {
    const result = await run("from host import slow\nprint('before')\nslow()\nprint('not reached')", {
      functions: { slow: () => new Promise((resolve) => setTimeout(resolve, 3000)) }, limits: { host_seconds: 0.3 },
    });
    assert.equal(result.status, "host_time_limit");
    assert.equal(result.limit, "host_time");
    assert.equal(result.stdout, "before\n");
  });

  test("Stop during a call ends the run and drops the call's answer", async () => {
    let release;
    let called;
    const reached = new Promise((resolve) => { called = resolve; });
    const pending = run("from host import wait\nprint('calling')\nprint(wait())\nprint('not reached')", {
      functions: { wait: () => { called(); return new Promise((resolve) => { release = resolve; }); } },
    });
    await reached;
    controller.stop(nextId - 1);
    const result = await pending;
    release("too late");
    assert.equal(result.status, "cancelled");
    assert.doesNotMatch(result.stdout, /too late|not reached/);
    const next = await run("from host import f\nprint(f())", { functions: { f: () => "fresh" } });
    assert.equal(next.status, "ok", next.stderr);
    assert.equal(next.stdout, "fresh\n");
  });
});
