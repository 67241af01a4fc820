// The playground page's glue: editor, Run/Stop, tier choice, streaming output, input line, share.
import { Runner } from "./client.js";
import { STUDENT_FILENAME } from "./protocol.js";
import { askLine, OutputView } from "./render.js";
import { decodeCode, encodeCode } from "./share.js";

const config = JSON.parse(document.getElementById("playground-config").textContent);
const $ = (id) => document.getElementById(id);
const runButton = $("run");
const stopButton = $("stop");
const tierSelect = $("tier");
const stateText = $("state");
const outputPanel = $("output");
const view = new OutputView(outputPanel, { live: $("announce"), trustHtml: config.trust_html === true });

const SAMPLE = `# Runs in your browser (Pyodide), isolated from this page.
name = input("What is your name? ")
print(f"Hello, {name}!")

total = sum(i * i for i in range(1, 11))
print("Sum of squares 1..10 =", total)
`;

let current = null; // the run in progress: {abort: AbortController, ended: AbortController}
let whenPythonReady = null; // starts the lint once the browser's Python is ready (set below)

const storedTier = new URLSearchParams(location.search).get("tier");
tierSelect.value = ["auto", "browser", "server"].includes(storedTier) ? storedTier : config.tier;

// One id per browser, so the server gives each student of a class its own share (best effort:
// without keys the server cannot tell a changed id from a new browser).
function browserId() {
  const fresh = () => Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");
  try {
    let id = localStorage.getItem("wasm-runner-user");
    if (!id || !/^[0-9a-f]{24}$/.test(id)) localStorage.setItem("wasm-runner-user", (id = fresh()));
    return id;
  } catch {
    return fresh(); // storage blocked: one id for this page
  }
}

const runner = new Runner({
  base: new URL(config.base, location.href).href, tier: tierSelect.value, relay: config.relay, sandbox: config.sandbox,
  user: browserId(),
});
// The header's state says how loading goes only until the first run starts; from then on it says
// how the last run ended. Python's later news (it became ready after a first run on the server, a
// fresh runtime after a Stop) goes to the footer and must not overwrite that.
let ran = false;
function showLoadState() {
  if (ran || current) return;
  const ready = tierSelect.value === "server" || runner.browserInfo;
  stateText.textContent = ready ? "Ready" : runner.notice ? "Loading Python (without the snapshot)…" : "Loading Python…";
}

runner.onNotice = (text) => {
  showLoadState();
  $("where").textContent = text;
};
runner.onReady = (info) => {
  showLoadState();
  if (whenPythonReady) whenPythonReady();
  const notes = [`Browser runtime: Python ${info.python || "?"} (${info.runtime})`, info.shared ? "cross-origin isolated" : "not isolated (Stop restarts Python)"];
  if (info.snapshot === "rejected") notes.push(`started without the snapshot: ${info.snapshot_note}`);
  if (!info.interactive) notes.push("input() reads stdin given up front only");
  $("where").textContent = notes.join(" · ");
};

// Start the sandbox frame and Pyodide before the editor bundle is even fetched.
if (tierSelect.value !== "server") runner.prefetch();
showLoadState();
const { createEditor } = await import("./editor.js");

const editor = createEditor($("editor"), {
  doc: (await decodeCode(location.hash)) ?? SAMPLE,
  label: "Python code editor. Tab indents; press Escape then Tab to leave it. Control+Enter runs.",
  onRun: () => start({ fromEditor: true }),
});

// Lint while typing, loaded lazily: on the first edit or once the browser's Python is ready (or
// at once when this page runs on the server), so neither the first paint nor the first run waits
// for Ruff (11 MB of WebAssembly, from this server: dist/ruff.js, ruff.wasm).
const lintNote = $("lint-note");
let lintStarted = false;
function startLint() {
  if (lintStarted) return;
  lintStarted = true;
  lintNote.textContent = "Loading the checker…";
  import("./ruff.js")
    .then(({ startLinter }) => startLinter())
    .then(({ check }) => {
      // worded in the page's language at each check (docs/lint.md), as the explanations are
      const checkInPageLanguage = (code, lang = document.documentElement.lang || null) => check(code, lang);
      window.playground.lint = checkInPageLanguage;
      editor.attachLint((code) => checkInPageLanguage(code), {
        onFindings: (findings) => {
          const count = findings.length;
          lintNote.textContent = count === 0 ? "Checked as you type: no problems found"
            : `Checked as you type: ${count} ${count === 1 ? "problem" : "problems"} (Ctrl+Shift+M lists them, F8 goes to the next)`;
          document.body.dataset.lintCount = String(count);
        },
      });
    })
    .catch((error) => {
      lintNote.textContent = `The checker could not load (${error && error.message ? error.message : error}); Run still works.`;
    });
}
editor.view.dom.addEventListener("input", startLint, { once: true });
editor.view.dom.addEventListener("keydown", startLint, { once: true });
whenPythonReady = () => setTimeout(startLint, 0);
if (tierSelect.value === "server" || runner.browserInfo) whenPythonReady();

function showTier() {
  const picked = tierSelect.value === "auto" ? runner.autoTier : null;
  $("tier-note").textContent = picked ? `auto runs ${picked === "browser" ? "in your browser" : "on the server"} for this page` : "";
}

async function start({ fromEditor = false, tier = tierSelect.value } = {}) {
  if (current) return;
  const abort = new AbortController();
  const ended = new AbortController(); // closes the input form when the run ends, however it ends
  current = { abort, ended };
  ran = true;
  runButton.disabled = true;
  stopButton.disabled = false;
  stateText.textContent = "Running…";
  view.clear();
  const code = editor.getCode();
  const result = await runner.run(code, {
    tier,
    filename: STUDENT_FILENAME,
    lang: document.documentElement.lang || null, // the explanation's language (docs/explanations.md)
    signal: abort.signal,
    onOutput: ({ stream, text }) => view.text(stream, text),
    onRich: (output) => view.rich(output),
    onInput: async (prompt) => {
      stateText.textContent = "Waiting for input";
      view.flush();
      const line = await askLine($("input-form"), $("input-label"), $("input-box"), prompt, ended.signal);
      if (line !== null && !ended.signal.aborted) view.echo(line);
      if (!ended.signal.aborted) stateText.textContent = "Running…";
      return line;
    },
  });
  ended.abort();
  const actions = [];
  // "Run it on the server" where the server tier has the module (or where the page cannot tell)
  if (result.missing && result.tier === "browser" && (result.missing.tier === "server" || !result.missing.sentence)) {
    actions.push({ label: "Run it on the server", run: () => start({ tier: "server" }) });
  }
  const text = view.end(result, { actions });
  if (editor.markSpan) editor.markSpan(result.explanation ? result.explanation.span : null);
  stateText.textContent = result.status === "ok" ? "Done" : text.split(" — ")[0];
  current = null;
  runButton.disabled = false;
  stopButton.disabled = true;
  document.body.dataset.lastStatus = result.status;
  window.lastResult = result;
  showTier();
  // Focus goes back where the student works: the editor after a keyboard run from it, else the output.
  const lost = !document.activeElement || document.activeElement === document.body || document.activeElement === stopButton
    || document.activeElement === runButton || document.activeElement === $("input-box");
  if (fromEditor) editor.focus();
  else if (lost) outputPanel.focus();
}

function stop() {
  if (current) {
    stateText.textContent = "Stopping…";
    current.abort.abort();
  }
}

runButton.addEventListener("click", () => start());
stopButton.addEventListener("click", stop);
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.shiftKey) {
    event.preventDefault();
    start({ fromEditor: Boolean(event.target.closest && event.target.closest(".cm-editor")) });
  } else if (event.key === "Escape" && current) {
    stop();
  }
}, true);
tierSelect.addEventListener("change", () => {
  runner.tier = tierSelect.value;
  if (tierSelect.value !== "server") runner.prefetch();
  showTier();
  showLoadState();
});
$("share").addEventListener("click", async () => {
  const url = new URL(location.href);
  url.hash = await encodeCode(editor.getCode());
  history.replaceState(null, "", url);
  let copied = false;
  try {
    await navigator.clipboard.writeText(url.href);
    copied = true;
  } catch {
    copied = false;
  }
  $("share-note").textContent = copied ? "Link copied" : "Link is in the address bar";
});

// While the server prepares its runtime (compiled once, on its first start) say so, and let
// "auto" run in the browser meanwhile; a runtime that could not be prepared is said too.
async function watchServer() {
  const note = $("server-note");
  for (;;) {
    let body;
    try {
      body = await (await fetch(new URL("readyz", new URL(config.base, location.href)), { cache: "no-store" })).json();
    } catch {
      return; // no answer: the runs' own errors will say what is wrong
    }
    const runtimes = Array.isArray(body && body.runtimes) ? body.runtimes : [];
    const preparing = runtimes.filter((r) => r && r.state === "preparing");
    if (preparing.length) {
      const left = Math.max(...preparing.map((r) => Number(r.seconds_left) || 0));
      note.textContent = `The server runtime is being prepared: first start only, about ${left} s. Runs in your browser work now.`;
      if (!runner.autoTier && !current) runner.autoTier = "browser";
    } else if (runtimes.some((r) => r && r.state === "failed")) {
      note.textContent = "The server runtime could not be prepared (the server's log says why). Runs in your browser still work.";
    } else {
      note.hidden = true;
      return;
    }
    note.hidden = false;
    showTier();
    await new Promise((resolve) => setTimeout(resolve, 3000));
  }
}
watchServer();

window.playground = { runner, editor, start, stop, view };

// ?exercise=ID: the exercise's instructions above the editor and a Check button beside Run;
// checks run where the tier says (server: hidden checks stay there; browser: its bundle, as
// practice), and always on the server for an exercise the browser may not check.
const exerciseRef = new URLSearchParams(location.search).get("exercise");
if (exerciseRef) {
  const { mountExercise } = await import("./exercise.js");
  const live = document.createElement("div");
  live.className = "visually-hidden";
  live.setAttribute("role", "status");
  live.setAttribute("aria-live", "polite");
  document.body.append(live);
  window.playground.exercise = mountExercise({
    ref: exerciseRef, base: new URL(config.base, location.href).href, runner, bar: runButton.parentElement,
    runButton, instructionsBefore: $("editor"), resultsAfter: $("output"), live,
    getCode: () => editor.getCode(), setCode: (text) => editor.setCode(text),
    tier: () => tierSelect.value, lang: () => document.documentElement.lang || null, // a check's explanation
    onBusy: (on, abort) => {
      runButton.disabled = on;
      stopButton.disabled = !on;
      current = on ? { abort, ended: new AbortController() } : null;
      ran = true;
      stateText.textContent = on ? "Checking…" : "Done";
      if (!on) showTier(); // a Check in "auto" may have decided where this page runs
    },
  });
  if (!location.hash) editor.setCode(""); // the sample makes way for the starter code
  await window.playground.exercise.ready;
}
