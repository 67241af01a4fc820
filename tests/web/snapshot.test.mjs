// The Pyodide memory snapshot and the spare worker, with real Pyodide in Node worker threads:
// a valid snapshot is used, a tampered or foreign one is rejected (normal start, same results),
// and the spare that replaces a worker a Stop ended holds nothing of the stopped run.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { createNodeController, makeNodeSnapshot } from "../../web/src/node.js";
import { sha256Hex } from "../../web/src/sha256.js";
import { packSnapshot, unpackSnapshot } from "../../web/src/worker-core.js";

const sha = (bytes) => createHash("sha256").update(bytes).digest("hex");

test("sha256.js agrees with node:crypto at every padding boundary", () => {
  for (const n of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 100003]) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 31 + 7) & 255);
    assert.equal(sha256Hex(bytes), sha(bytes), `length ${n}`);
  }
});

test("packing a snapshot keeps every byte and drops only pages of zeros", () => {
  const memory = new Uint8Array(5 * 4096 + 100);
  memory[10] = 1; memory[3 * 4096 + 5] = 2; memory[memory.length - 1] = 3;
  const packed = packSnapshot(memory);
  assert.ok(packed.length < memory.length / 2);
  assert.deepEqual(unpackSnapshot(packed), memory);
  assert.throws(() => unpackSnapshot(packed.subarray(0, packed.length - 1)), /cut short/);
});

describe("memory snapshot", () => {
  let snapshot; // {bytes (gzip), sha256}
  const controllers = [];

  before(async () => {
    const gz = gzipSync(await makeNodeSnapshot());
    snapshot = { bytes: new Uint8Array(gz), sha256: sha(gz) };
  });
  after(() => { for (const c of controllers) c.dispose(); });

  async function start(snap) {
    const notices = [];
    const controller = createNodeController({
      workerConfig: snap ? { snapshot: snap } : {},
      onEvent: (event) => { if (event.type === "status" && event.id === undefined) notices.push(event.text); },
    });
    controllers.push(controller);
    const info = await controller.prefetch();
    return { controller, info, notices };
  }

  const PROBE = [
    "import random, sys, time",
    "print(6 * 7)",
    "print(sys.path[0], time.sleep.__name__, sorted(k for k in globals() if not k.startswith('__')))",
    "import turtle; print(turtle.__file__)",
    "print(random.random())",
  ].join("\n");

  test("a valid snapshot is used and gives the interpreter a normal start gives", async () => {
    const normal = await start(null);
    const restored = await start(snapshot);
    assert.equal(normal.info.snapshot, "none");
    assert.equal(restored.info.snapshot, "used");
    assert.deepEqual(restored.notices, []);
    const a = await normal.controller.run({ id: 1, code: PROBE });
    const b = await restored.controller.run({ id: 1, code: PROBE });
    assert.equal(b.status, "ok", b.message);
    const lines = (r) => r.stdout.split("\n");
    assert.deepEqual(lines(b).slice(0, 3), lines(a).slice(0, 3));
    assert.equal(lines(b)[0], "42");
    assert.equal(lines(b)[1], "/wasm-runner _sleep ['random', 'sys', 'time']");
    // the preloaded random module is reseeded after a restore: two restores differ
    const again = await start(snapshot);
    const c = await again.controller.run({ id: 1, code: PROBE });
    assert.notEqual(lines(c)[3], lines(b)[3]);
    // errors still come back as on a normal start
    const error = await restored.controller.run({ id: 2, code: "1/0" });
    assert.equal(error.status, "error");
    assert.match(error.stderr, /ZeroDivisionError: division by zero/);
  });

  test("a tampered snapshot is rejected: normal start, same results, and it says so", async () => {
    const bytes = snapshot.bytes.slice();
    bytes[bytes.length >> 1] ^= 0xff;
    const { controller, info, notices } = await start({ bytes, sha256: snapshot.sha256 });
    assert.equal(info.snapshot, "rejected");
    assert.match(info.snapshot_note, /sha256/);
    assert.equal(notices.length, 1);
    assert.match(notices[0], /snapshot was not used .*starting Python normally/);
    const result = await controller.run({ id: 1, code: "print(6 * 7)" });
    assert.equal(result.status, "ok");
    assert.equal(result.stdout, "42\n");
  });

  test("a snapshot that verifies but is not Pyodide's memory (stale, another build) is rejected", async () => {
    const foreign = gzipSync(packSnapshot(new Uint8Array(8192).fill(7)));
    const { controller, info } = await start({ bytes: new Uint8Array(foreign), sha256: sha(foreign) });
    assert.equal(info.snapshot, "rejected");
    assert.match(info.snapshot_note, /magic number/); // Pyodide's own check
    const unpacked = gzipSync(Buffer.alloc(4096, 7)); // not even packed
    const other = await start({ bytes: new Uint8Array(unpacked), sha256: sha(unpacked) });
    assert.equal(other.info.snapshot, "rejected");
    assert.match(other.info.snapshot_note, /not a packed wasm-runner snapshot/);
    const result = await controller.run({ id: 1, code: "print(sum(range(10)))" });
    assert.equal(result.stdout, "45\n");
  });
});

describe("spare worker", () => {
  let controller;
  const printed = new Map(); // run id -> resolve, called when that run prints "go"
  before(() => {
    controller = createNodeController({
      spare: true,
      onEvent: (event) => {
        if (event.type === "stream" && event.chunks.some((c) => c.text.includes("go"))) printed.get(event.id)?.();
      },
    });
  });
  after(() => controller.dispose());

  test("after a Stop that ended the worker, the loaded spare runs the next program with nothing left over", async () => {
    // a first run, then the spare loads (it starts once a run has settled)
    const first = await controller.run({ id: 1, code: "print('first')" });
    assert.equal(first.stdout, "first\n");
    assert.ok(controller.spare, "a spare worker is loading");
    await controller.spare.ready;
    const leaky = [
      "import sys, types, js",
      "secret = 'left over'",
      "sys.modules['made_up'] = types.ModuleType('made_up')",
      "open('/home/pyodide/left.txt', 'w').write('x')",
      "js.setInterval(lambda: print('tick from the stopped run'), 20)",
      "import collections, itertools",
      "print('go', flush=True)",
      "collections.deque(itertools.count(), maxlen=0)  # C code: only ending the worker stops it",
    ].join("\n");
    // Stop once the program is in its C-level loop (it printed "go"; a busy machine may take
    // long to get there), not after a fixed time.
    const wentIn = new Promise((resolve) => printed.set(2, resolve));
    const pending = controller.run({ id: 2, code: leaky });
    await wentIn;
    await new Promise((resolve) => setTimeout(resolve, 150));
    controller.stop(2);
    const result = await pending;
    assert.equal(result.status, "cancelled");
    assert.equal(controller.respawns, 1);
    assert.ok(controller.worker && controller.worker.info, "the spare took over already loaded");
    const next = await controller.run({
      id: 3,
      code: [
        "import sys, os, time",
        "time.sleep(0.3)",
        "print('secret' in globals(), 'made_up' in sys.modules, os.path.exists('/home/pyodide/left.txt'))",
      ].join("\n"),
    });
    assert.equal(next.status, "ok", next.message);
    assert.equal(next.stdout, "False False False\n");
  });
});
