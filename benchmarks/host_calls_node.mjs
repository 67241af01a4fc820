// Host functions in the browser tier, measured in Node: the round trip of one call of a page
// function from Python code (worker -> controller -> "page" -> controller -> worker), with the
// browser tier's own runtime (real Pyodide in a worker thread, the real controller, the page side
// of hostcalls.js). Not a test: it prints JSON with the figures.
//
//   cd web && node ../benchmarks/host_calls_node.mjs [--calls 10000] [--runs 5]
import { answerCall, checkFunctions } from "../web/src/hostcalls.js";
import { createNodeController } from "../web/src/node.js";

const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(process.argv[at + 1]);
};
const calls = arg("calls", 10000);
const runs = arg("runs", 5);
const exposed = checkFunctions({ tick: (i) => i + 1 });

const controller = createNodeController({
  onEvent: (event) => {
    if (event.type === "host-call") {
      answerCall(exposed, event.request).then((answer) => controller.hostAnswer(event.id, event.call, answer));
    }
  },
});
await controller.prefetch();
const code = `
import time
from host import tick
n = ${calls}
t0 = time.perf_counter()
for i in range(n):
    assert tick(i) == i + 1
print((time.perf_counter() - t0) / n * 1e6)
`;
const perCall = [];
for (let id = 1; id <= runs + 1; id++) {
  const result = await controller.run({ id, code, functions: ["tick"], limits: { wall_seconds: 600, host_seconds: 600 } });
  if (result.status !== "ok") throw new Error(`${result.status}: ${result.stderr}`);
  if (id > 1) perCall.push(Number(result.stdout)); // the first run warms up
}
controller.dispose();
perCall.sort((a, b) => a - b);
console.log(JSON.stringify({
  where: "node", calls_per_run: calls, runs,
  round_trip_us: { median: perCall[Math.floor(perCall.length / 2)], min: perCall[0], max: perCall[perCall.length - 1] },
  node: process.version,
}));
