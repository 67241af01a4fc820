// The browser tier's runtime (worker-core + controller) with real Pyodide in Node worker threads.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createNodeController } from "../../web/src/node.js";
import { PLOT_PROGRAM } from "./plot_standin.mjs";

const RESULT_FIELDS = [
  "status", "exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "fuel_used",
  "wall_ms", "files", "outputs", "message", "limit", "runtime",
];
const STATUSES = ["ok", "error", "cpu_limit", "timeout", "memory_limit", "output_limit", "disk_limit", "invalid_input", "internal_error", "cancelled", "host_calls_limit", "host_bytes_limit", "host_time_limit"];

let controller;
let events = [];
let nextId = 1;
let answer = null; // what input() gets next (an array of lines)

function run(code, options = {}) {
  return controller.run({ id: nextId++, code, ...options });
}

function assertShape(result) {
  for (const field of RESULT_FIELDS) assert.ok(field in result, `result has ${field}`);
  assert.ok(STATUSES.includes(result.status), `known status ${result.status}`);
  assert.equal(typeof result.stdout, "string");
  assert.ok(Array.isArray(result.outputs));
}

/** Run `code`, stop it once it printed `marker`, return the result. */
async function stopAfter(code, marker, settleMs = 0) {
  const id = nextId++;
  let listener;
  const seen = new Promise((resolve) => {
    listener = (event) => {
      if (event.type === "stream" && event.id === id && event.chunks.some((c) => c.text.includes(marker))) resolve();
    };
    listeners.add(listener);
  });
  const pending = controller.run({ id, code });
  await seen;
  listeners.delete(listener);
  if (settleMs) await new Promise((resolve) => setTimeout(resolve, settleMs));
  controller.stop(id);
  return pending;
}
const listeners = new Set();

before(async () => {
  controller = createNodeController({
    onEvent: (event) => {
      events.push(event);
      for (const listener of listeners) listener(event);
      if (event.type === "input-request") {
        const line = answer && answer.length ? answer.shift() : null;
        controller.input(event.id, line);
      }
    },
  });
  const info = await controller.prefetch();
  assert.match(info.runtime, /^pyodide-/);
});

after(() => controller.dispose());

describe("runs", () => {
  test("prints, with the server tier's result shape", async () => {
    const result = await run("import sys\nprint('hello', 6 * 7)\nprint('warn', file=sys.stderr)");
    assertShape(result);
    assert.equal(result.status, "ok");
    assert.equal(result.exit_code, 0);
    assert.equal(result.stdout, "hello 42\n");
    assert.equal(result.stderr, "warn\n");
    assert.equal(result.limit, null);
  });

  test("an exception is an error with the user's traceback only, source lines and carets", async () => {
    const result = await run("def f():\n    return 1 / 0\nf()", { filename: "main.py" });
    assert.equal(result.status, "error");
    assert.equal(result.exit_code, 1);
    assert.equal(result.stderr, [
      "Traceback (most recent call last):",
      '  File "main.py", line 3, in <module>',
      "    f()",
      "    ~^^",
      '  File "main.py", line 2, in f',
      "    return 1 / 0",
      "           ~~^~~",
      "ZeroDivisionError: division by zero",
      "",
    ].join("\n"));
    assert.match(result.stderr, /ZeroDivisionError/);
    assert.doesNotMatch(result.stderr, /_pyodide|wasm-runner/);
  });

  test("a typo of a stdlib module gets Python's hint and no package note; an unknown package gets one", async () => {
    const typo = await run("import maths\nprint(maths.pi)");
    assert.equal(typo.status, "error");
    assert.match(typo.stderr, /ModuleNotFoundError: No module named 'maths'\. Did you mean: 'math'\?/);
    assert.equal(typo.missing, undefined); // no "not in the browser's package index", no offer of the server
    const unknown = await run("import no_such_package_xyz");
    assert.equal(unknown.status, "error");
    assert.equal(unknown.missing.reason, "not_listed");
    assert.equal(unknown.missing.module, "no_such_package_xyz");
  });

  test("sys.exit codes", async () => {
    assert.equal((await run("import sys; sys.exit(3)")).exit_code, 3);
    assert.equal((await run("import sys; sys.exit(0)")).status, "ok");
    const text = await run("raise SystemExit('bye')");
    assert.equal(text.exit_code, 1);
    assert.equal(text.stderr, "bye\n");
  });

  test("each run starts with fresh globals", async () => {
    await run("secret = 41");
    const result = await run("print('secret' in globals())");
    assert.equal(result.stdout, "False\n");
  });

  test("output streams before the run ends", async () => {
    events = [];
    const id = nextId;
    const result = await run("import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)");
    const streamed = events.filter((e) => e.type === "stream" && e.id === id).flatMap((e) => e.chunks.map((c) => c.text)).join("");
    assert.equal(streamed, "0\n1\n2\n");
    assert.ok(events.filter((e) => e.type === "stream" && e.id === id).length >= 2, "several chunks");
    assert.equal(result.stdout, "0\n1\n2\n");
  });

  test("invalid limits and code are refused, not run", async () => {
    const bad = await run("print(1)", { limits: { wall_seconds: -1 } });
    assert.equal(bad.status, "invalid_input");
    assert.match(bad.message, /wall_seconds/);
    const unknown = await run("print(1)", { limits: { bogus: 1 } });
    assert.equal(unknown.status, "invalid_input");
    const notCode = await controller.run({ id: nextId++, code: 42 });
    assert.equal(notCode.status, "invalid_input");
  });
});

describe("input", () => {
  test("input() asks the page and waits, prompt first", async () => {
    answer = ["Ada"];
    events = [];
    const id = nextId;
    const result = await run("name = input('Name? ')\nprint('Hello', name)", { interactive: true });
    assert.equal(result.status, "ok");
    assert.equal(result.stdout, "Name? Hello Ada\n");
    const request = events.find((e) => e.type === "input-request" && e.id === id);
    assert.equal(request.prompt, "Name? ");
    const promptChunk = events.findIndex((e) => e.type === "stream" && e.chunks.some((c) => c.text.includes("Name? ")));
    assert.ok(promptChunk !== -1 && promptChunk < events.indexOf(request), "prompt streamed before the wait");
  });

  test("stdin given up front is read first; then EOF when not interactive", async () => {
    const result = await run("print(input() + input())\ntry:\n    input()\nexcept EOFError:\n    print('eof')", { stdin: "a\nb\n" });
    assert.equal(result.stdout, "ab\neof\n");
    const lines = await run("import sys\nprint(sys.stdin.read().split())", { stdin: "x y\nz" });
    assert.equal(lines.stdout, "['x', 'y', 'z']\n");
  });

  test("end of input from the page raises EOFError", async () => {
    answer = [null];
    const result = await run("try:\n    input('> ')\nexcept EOFError:\n    print('eof')", { interactive: true });
    assert.equal(result.stdout, "> eof\n");
  });
});

describe("limits and stop", () => {
  test("wall-clock limit ends a busy loop as timeout, and the runtime still works", async () => {
    const result = await run("while True:\n    pass", { limits: { wall_seconds: 0.3 } });
    assert.equal(result.status, "timeout");
    assert.equal(result.limit, "wall");
    assert.match(result.message, /0.3 s/);
    assert.equal((await run("print('alive')")).stdout, "alive\n");
  });

  test("output cap ends the run as output_limit with truncated output", async () => {
    const result = await run("while True:\n    print('x' * 99)", { limits: { stdout_bytes: 1000 } });
    assert.equal(result.status, "output_limit");
    assert.equal(result.limit, "output");
    assert.equal(result.stdout_truncated, true);
    assert.equal(result.stdout.length, 1000);
    assert.equal((await run("print('next')")).stdout, "next\n");
  });

  test("a program that swallows KeyboardInterrupt is still stopped", async () => {
    const code = "import time\nprint('go', flush=True)\nwhile True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        pass";
    const result = await stopAfter(code, "go");
    assert.equal(result.status, "cancelled");
    assert.equal((await run("print('fresh')")).stdout, "fresh\n");
  });

  test("100 stops of busy, sleeping and C-level loops: 100 effective", async () => {
    const kinds = [
      ["busy", "print('go', flush=True)\nwhile True:\n    pass"],
      ["sleep", "import time\nprint('go', flush=True)\nwhile True:\n    time.sleep(0.5)"],
      ["c-level", "import collections, itertools\nprint('go', flush=True)\ncollections.deque(itertools.count(), maxlen=0)"],
    ];
    const counts = { busy: 0, sleep: 0, "c-level": 0 };
    const respawnsBefore = controller.respawns;
    let effective = 0;
    for (let i = 0; i < 100; i++) {
      // C-level loops cannot be interrupted and need a restart: fewer of them keep this short.
      const [kind, code] = i % 10 === 9 ? kinds[2] : kinds[i % 2];
      // give the C-level program time to enter its loop, where only terminating stops it
      const result = await stopAfter(code, "go", kind === "c-level" ? 150 : 0);
      if (result.status === "cancelled") effective += 1;
      counts[kind] += 1;
    }
    // What a user sees: every Stop ended its program, and the next Run works. How the Stop ladder
    // got there is not asserted beyond the floor (a C-level loop cannot be interrupted, so it
    // always needs a fresh worker): on a busy machine an interrupt can arrive late and the ladder
    // rightly escalates to a fresh worker for a Python-level loop too.
    assert.equal(effective, 100, JSON.stringify(counts));
    assert.ok(controller.respawns - respawnsBefore >= counts["c-level"], "each C-level loop needed a fresh worker");
    assert.equal((await run("print(sum(range(10)))")).stdout, "45\n");
  });

  test("a Stop pressed while a run starts ends it as stopped, on a fresh runtime and a used one", async () => {
    // A long program: finding its imports and compiling it take a while, so the Stop lands while
    // the run is starting (in Pyodide's own Python, before this fix an internal error), or at
    // the program's first line, or in its loop: whichever, the student sees "stopped".
    const body = "x = 1\n".repeat(4000);
    const programs = [
      ["fresh", body + "while True:\n    pass", 5],
      ["fresh", body + "while True:\n    pass", 60],
      ["used", body + "while True:\n    pass", 0],
      ["used", body + "while True:\n    pass", 5],
      ["used", "import asyncio\n" + body + "while True:\n    await asyncio.sleep(0)", 5],
    ];
    const seen = [];
    for (const [runtime, code, delayMs] of programs) {
      if (runtime === "fresh") {
        // a C-level loop: only a fresh runtime ends it; wait until that one is loaded
        assert.equal((await stopAfter("import collections, itertools\nprint('go', flush=True)\ncollections.deque(itertools.count(), maxlen=0)", "go", 150)).status, "cancelled");
        await controller.prefetch();
      } else {
        assert.equal((await run("print('warm')")).stdout, "warm\n");
      }
      const id = nextId++;
      const pending = controller.run({ id, code });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      controller.stop(id);
      const result = await pending;
      seen.push(`${runtime} +${delayMs} ms: ${result.status} (${result.message.split("\n")[0]})`);
    }
    assert.deepEqual(seen.filter((line) => !/: cancelled \(The run was stopped\.\)$/.test(line)), [], seen.join("; "));
    assert.equal((await run("print('after')")).stdout, "after\n");
  });

  test("deep recursion is a RecursionError, not a dead runtime", async () => {
    const result = await run("def f(n):\n    return f(n + 1)\nf(0)");
    assert.equal(result.status, "error");
    assert.match(result.stderr, /RecursionError/);
    assert.equal((await run("print('ok')")).stdout, "ok\n");
  });
});

describe("plots", () => {
  test("figures come back as PNG outputs", async () => {
    const result = await run(PLOT_PROGRAM);
    assert.equal(result.status, "ok", result.stderr);
    assert.equal(result.stdout, "plotted\n");
    assert.equal(result.outputs.length, 1);
    const [image] = result.outputs;
    assert.equal(image.kind, "image");
    assert.equal(image.mime, "image/png");
    assert.deepEqual([...Buffer.from(image.data, "base64").subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  });
});
