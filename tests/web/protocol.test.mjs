// Message shapes, limit checks, result sanitising and the SSE parser of the browser tier.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkLimits, checkRequest, emptyResult, isMessage, message } from "../../web/src/protocol.js";
import { sanitizeResult, serverSentEvents } from "../../web/src/client.js";

test("well-formed messages pass, others are refused", () => {
  assert.ok(isMessage(message("run", { id: 1, code: "print(1)", interactive: false })));
  assert.ok(isMessage(message("stream", { id: 2, chunks: [{ stream: "stdout", text: "x" }, { stream: "stderr", text: "y" }] })));
  assert.ok(!isMessage(message("stream", { id: 2, chunks: [] })), "no empty batches");
  assert.ok(!isMessage(message("stream", { id: 2, stream: "stdout", text: "x" })), "one ordered list of chunks");
  assert.ok(isMessage(message("run", { id: 1, code: "x", interactive: false, filename: "main.py" })));
  assert.ok(!isMessage(message("run", { id: 1, code: "x", interactive: false, filename: "../etc/passwd" })), "a file name, not a path");
  assert.ok(!isMessage({ type: "run", id: 1, code: "x", interactive: false }), "no channel tag");
  assert.ok(!isMessage(message("run", { id: 0, code: "x", interactive: false })), "id must be positive");
  assert.ok(!isMessage(message("run", { id: 1, code: 5, interactive: false })), "code must be text");
  assert.ok(!isMessage(message("stream", { id: 1, chunks: [{ stream: "secret", text: "x" }] })));
  assert.ok(!isMessage(message("eval", { code: "alert(1)" })), "unknown type");
  assert.ok(!isMessage(null) && !isMessage("run") && !isMessage([]));
  assert.ok(isMessage(message("assets", { files: { a: new ArrayBuffer(1) } })));
  assert.ok(!isMessage(message("assets", { files: { a: "not bytes" } })));
  assert.ok(!isMessage(message("run", { id: 1, code: "x", interactive: false }), "stop"), "type filter");
});

test("limits: defaults, ranges, unknown names, server-only names", () => {
  assert.deepEqual(checkLimits(undefined).limits, {
    wall_seconds: 10, stdout_bytes: 1 << 20, stderr_bytes: 1 << 20, input_wait_seconds: 300,
    host_calls: 100000, host_call_bytes: 1 << 20, host_seconds: 5, // the page's functions (hostcalls.js)
  });
  assert.match(checkLimits({ host_call_bytes: 10 }).error, /between 1024 and 16777216/);
  assert.equal(checkLimits({ input_wait_seconds: 30 }).limits.input_wait_seconds, 30);
  assert.match(checkLimits({ input_wait_seconds: 0 }).error, /between 1 and 86400/);
  assert.equal(checkLimits({ wall_seconds: 2 }).limits.wall_seconds, 2);
  assert.match(checkLimits({ wall_seconds: 0 }).error, /between 0.05 and 3600/);
  assert.match(checkLimits({ wall_seconds: "5" }).error, /must be a number/);
  assert.match(checkLimits({ nope: 1 }).error, /unknown limit: nope/);
  assert.equal(checkLimits({ cpu_seconds: 1, memory_mb: 64 }).error, undefined);
  assert.match(checkLimits([1]).error, /object/);
});

test("request checks", () => {
  assert.equal(checkRequest("print(1)", null), "");
  assert.match(checkRequest("x".repeat((1 << 20) + 1)), /larger than/);
  assert.match(checkRequest("x", 5), /stdin/);
});

test("sanitizeResult keeps exactly the contract's fields with their types", () => {
  const clean = sanitizeResult({ status: "weird", stdout: 5, outputs: [{ kind: "image", mime: "image/png", data: "AA==" }, { bad: 1 }], extra: "dropped" });
  assert.deepEqual(Object.keys(clean).sort(), Object.keys(emptyResult("")).sort());
  assert.equal(clean.status, "internal_error");
  assert.equal(clean.stdout, "");
  assert.equal(clean.outputs.length, 1);
  // an output's place among the streams (docs/notebooks.md "Order") is kept only as whole bytes
  const placed = sanitizeResult({ status: "ok", outputs: [
    { kind: "display", mime: "m/x", data: "{}", at: { stdout: 3, stderr: 0 }, extra: 1 },
    { kind: "display", mime: "m/x", data: "{}", at: { stdout: -1, stderr: "0" } }] });
  assert.deepEqual(placed.outputs, [{ kind: "display", mime: "m/x", data: "{}", at: { stdout: 3, stderr: 0 } },
    { kind: "display", mime: "m/x", data: "{}" }]);
});

test("server-sent events are parsed across chunk boundaries", async () => {
  const text = 'event: start\ndata: {"a":1}\n\n: keep-alive\n\nevent: stdout\ndata: {"data":"hi\\n"}\n\nevent: result\ndata: {"status":"ok"}\n\n';
  const body = new ReadableStream({
    start(controller) {
      for (let i = 0; i < text.length; i += 7) controller.enqueue(new TextEncoder().encode(text.slice(i, i + 7)));
      controller.close();
    },
  });
  const events = [];
  for await (const event of serverSentEvents(body)) events.push(event);
  assert.deepEqual(events.map((e) => e.event), ["start", "stdout", "result"]);
  assert.equal(JSON.parse(events[1].data).data, "hi\n");
});
