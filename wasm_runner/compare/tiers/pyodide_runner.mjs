// Runs one Python program in Pyodide inside a Node worker thread; prints one JSON result line.
//
// usage: node pyodide_runner.mjs <pyodide-dir> <limits-json>   (program source on stdin)
// limits-json: {"wall_ms": n, "stdout_bytes": n, "stderr_bytes": n}
// The main thread enforces the wall deadline (from the moment Pyodide is ready) and the output
// caps by terminating the worker. Pyodide itself has no CPU or memory limit.
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const WRAPPER = `
import sys, traceback
def _wr_main(code):
    try:
        exec(compile(code, "main.py", "exec"), {"__name__": "__main__"})
        return 0
    except SystemExit as e:
        c = e.code
        if c is None:
            return 0
        if isinstance(c, int):
            return c if -(2**31) <= c < 2**31 else 2**31 - 1
        print(c, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
`;

async function workerMain() {
  const { pyodideDir, source } = workerData;
  const started = performance.now();
  const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
  const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep });
  const send = (stream) => ({
    write: (buf) => {
      parentPort.postMessage({ type: stream, data: Buffer.from(buf).toString("latin1") });
      return buf.length;
    },
  });
  pyodide.setStdout(send("stdout"));
  pyodide.setStderr(send("stderr"));
  parentPort.postMessage({ type: "ready", load_ms: performance.now() - started });
  try {
    pyodide.runPython(WRAPPER);
    const rc = pyodide.globals.get("_wr_main")(source);
    parentPort.postMessage({ type: "done", exit_code: rc });
  } catch (err) {
    parentPort.postMessage({ type: "crash", message: String(err && err.message || err).slice(0, 2000) });
  }
}

function mainThread() {
  const [pyodideDir, limitsJson] = process.argv.slice(2);
  const limits = JSON.parse(limitsJson);
  const source = readFileSync(0, "utf8");
  const t0 = performance.now();
  const out = { stdout: [], stderr: [], stdoutBytes: 0, stderrBytes: 0 };
  let finished = false;
  let timer = null;
  let loadMs = null;
  let runStart = null;
  const worker = new Worker(new URL(import.meta.url), { workerData: { pyodideDir, source } });

  const finish = (fields) => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    const dec = (parts) => Buffer.from(parts.join(""), "latin1").toString("utf8");
    const result = {
      stdout: dec(out.stdout),
      stderr: dec(out.stderr),
      load_ms: loadMs,
      run_ms: runStart === null ? null : performance.now() - runStart,
      total_ms: performance.now() - t0,
      exit_code: null,
      limit: null,
      message: "",
      ...fields,
    };
    process.stdout.write(JSON.stringify(result) + "\n", () => {
      worker.terminate().finally(() => process.exit(0));
    });
  };

  worker.on("message", (msg) => {
    if (finished) return;
    if (msg.type === "ready") {
      loadMs = msg.load_ms;
      runStart = performance.now();
      timer = setTimeout(() => finish({ status: "timeout", limit: "wall",
        message: `wall deadline of ${limits.wall_ms} ms reached` }), limits.wall_ms);
    } else if (msg.type === "stdout" || msg.type === "stderr") {
      const key = msg.type === "stdout" ? "stdoutBytes" : "stderrBytes";
      const cap = msg.type === "stdout" ? limits.stdout_bytes : limits.stderr_bytes;
      const room = cap - out[key];
      out[msg.type].push(room >= msg.data.length ? msg.data : msg.data.slice(0, Math.max(room, 0)));
      out[key] += msg.data.length;
      if (out[key] > cap) finish({ status: "output_limit", limit: "output", message: "output cap reached" });
    } else if (msg.type === "done") {
      finish({ status: msg.exit_code === 0 ? "ok" : "error", exit_code: msg.exit_code });
    } else if (msg.type === "crash") {
      finish({ status: "error", message: `Pyodide aborted: ${msg.message}` });
    }
  });
  worker.on("error", (err) => finish({ status: "error", message: `worker error: ${String(err).slice(0, 2000)}` }));
  worker.on("exit", (code) => finish({ status: code === 0 ? "error" : "error",
    message: `worker exited (code ${code}) before reporting` }));
}

if (isMainThread) mainThread();
else workerMain();
