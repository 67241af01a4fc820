// Run Python in Node with the browser tier's runtime and controller (tests, tools).
import { Worker } from "node:worker_threads";
import { RunController } from "./controller.js";

const WORKER_URL = new URL("./worker-node.js", import.meta.url);

/** A worker handle in the shape the controller expects. */
export function spawnNodeWorker() {
  const worker = new Worker(WORKER_URL);
  return {
    post: (msg, transfer) => worker.postMessage(msg, transfer || []),
    terminate: () => worker.terminate(),
    onMessage: (fn) => worker.on("message", fn),
    onError: (fn) => worker.on("error", fn),
  };
}

/** A controller running Pyodide in Node worker threads (SharedArrayBuffer always available). */
export function createNodeController(options = {}) {
  return new RunController({
    spawnWorker: spawnNodeWorker,
    workerConfig: options.workerConfig || {},
    isolated: options.isolated !== false,
    onEvent: options.onEvent,
    timings: options.timings,
    spare: Boolean(options.spare),
  });
}

/** A Pyodide memory snapshot made in this Node, packed (what web/snapshot.mjs writes), for tests. */
export async function makeNodeSnapshot() {
  const [{ loadPyodide }, { makeSnapshot, packSnapshot }] = await Promise.all([import("pyodide"), import("./worker-core.js")]);
  return packSnapshot(await makeSnapshot(loadPyodide));
}
