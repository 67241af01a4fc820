// Worker-thread entry for Node: the same runtime as the browser worker, over worker_threads.
import { parentPort } from "node:worker_threads";
import { loadPyodide } from "pyodide";
import { createWorkerRuntime } from "./worker-core.js";

const runtime = createWorkerRuntime({ post: (m) => parentPort.postMessage(m), loadPyodide });
parentPort.on("message", (msg) => runtime.handle(msg));
