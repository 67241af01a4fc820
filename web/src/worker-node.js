// Worker-thread entry for Node: the same runtime as the browser worker, over worker_threads.
// As in the browser, "init" hands over a MessagePort and everything after it travels on that port.
import { MessagePort, parentPort } from "node:worker_threads";
import { loadPyodide } from "pyodide";
import { createWorkerRuntime, trackTimers } from "./worker-core.js";

const timers = trackTimers(globalThis);
let runtime = null;
parentPort.on("message", (msg) => {
  if (runtime || !msg || msg.type !== "init" || !(msg.port instanceof MessagePort)) return;
  const port = msg.port;
  delete msg.port;
  parentPort.removeAllListeners("message");
  const loadModule = () => import("pyodide/pyodide.asm.mjs").then((m) => m.default);
  runtime = createWorkerRuntime({ post: (m) => port.postMessage(m), loadPyodide, loadModule, timers });
  port.on("message", (m) => runtime.handle(m));
  runtime.handle(msg);
});
