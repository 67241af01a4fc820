// <wasm-runner>: a runnable Python snippet for course pages. One script tag defines it:
//   <script type="module" src="https://runner.example/embed.js"></script>
//   <wasm-runner tier="browser" wall-seconds="5" readonly>print("hello")</wasm-runner>
// Attributes: tier (browser|server|auto), readonly, code (else the element's text),
// wall-seconds, output-bytes, stdin, exercise (an exercise id on this server, or a bundle URL:
// adds instructions, a Check button and per-check results; see docs/exercises.md),
// lint ("off": no marks while typing), lang (the language of explanations and lint marks; else the
// nearest `lang` around the element, the page's <html lang>).
// An editable example marks mistakes while the student types, as the playground does (docs/lint.md):
// Ruff's WebAssembly build and the lint modules come from the runner's origin (ruff.js and
// ruff.wasm beside this module), loaded once per page when the first example is focused or edited;
// a page of readonly examples loads none of it. A course page with its own CSP allows the runner's
// origin in script-src and connect-src, and 'wasm-unsafe-eval' in script-src for the lint.
// `element.expose({sensor: async (...args) => …})` gives the snippet functions of the page
// (browser tier): `from host import sensor` (see hostcalls.js).
import { Runner } from "./client.js";
import { exposeInto } from "./hostcalls.js";
import { STUDENT_FILENAME } from "./protocol.js";
import { CHECK_STYLE, mountExercise } from "./exercise.js";
import { askLine, OutputView } from "./render.js";

const STYLE = `
:host { display: block; margin: 1rem 0; font-family: system-ui, sans-serif; border: 1px solid #d9d9de; border-radius: .5rem; overflow: hidden; background: #fff; color: #1d1d1f; }
.code { background: #fbfbfa; border-bottom: 1px solid #d9d9de; max-height: 24rem; overflow: auto; }
.code pre { margin: 0; padding: .6rem .8rem; font: 14px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; }
.bar { display: flex; gap: .5rem; align-items: center; padding: .4rem .6rem; border-bottom: 1px solid #eee; }
button { font: inherit; min-height: 2.2rem; padding: .25rem .9rem; border-radius: .4rem; border: 1px solid #d9d9de; background: #fff; cursor: pointer; }
button.run { background: #2156c7; border-color: #2156c7; color: #fff; font-weight: 600; }
button:disabled { opacity: .5; cursor: default; }
button:focus-visible, input:focus-visible { outline: 3px solid #7aa2f7; outline-offset: 2px; }
.state { color: #5b5b63; font-size: .85rem; margin-left: auto; }
.output { margin: 0; padding: .5rem .8rem; min-height: 1.5rem; max-height: 20rem; overflow: auto; white-space: pre-wrap; word-break: break-word; font: 14px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; }
.output:empty { display: none; }
.out-stderr, .out-end:not(.status-ok) { color: #b42318; }
.out-stdin { color: #2156c7; font-weight: 600; }
.out-end { color: #1a7f37; font: .8rem system-ui, sans-serif; margin-top: .3rem; }
.out-image { max-width: 100%; display: block; }
.out-html, .out-latex { white-space: normal; margin: .4rem 0; overflow-x: auto; }
.out-html table { border-collapse: collapse; font: .85rem system-ui, sans-serif; }
.out-html th, .out-html td { border: 1px solid #d9d9de; padding: .15rem .5rem; text-align: right; }
form { display: flex; gap: .4rem; padding: .4rem .6rem; background: #eef3fd; }
form[hidden] { display: none; }
input { flex: 1; min-width: 0; font: inherit; padding: .25rem .4rem; }
.out-hidden { background: #fff8e6; color: #6b4e00; font: .8rem system-ui, sans-serif; padding: .2rem .4rem; margin-bottom: .3rem; }
.out-hidden button, .out-note button { min-height: 1.7rem; padding: .1rem .5rem; font-size: .8rem; }
.out-note { font: .8rem system-ui, sans-serif; margin-top: .2rem; }
.out-explain { margin-top: .4rem; padding: .4rem .6rem; border-left: 4px solid #b42318; background: #fff6e5; color: #222; font: .85rem system-ui, sans-serif; white-space: normal; }
.out-explain p { margin: .2rem 0 0; }
.out-explain-hint::before { content: "→ "; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

// Examples on one page share Python runtimes (one sandbox frame and Pyodide each), at most
// MAX_RUNTIMES of them; an example whose Run finds them all busy says that it waits.
const MAX_RUNTIMES = 2;

// The linter of every editable example on the page: one load of dist/ruff.js (from this module's
// origin, the runner's) and one Ruff workspace, started by the first example focused or edited.
let linterLoad = null;
const loadLinter = () => (linterLoad ??= import("./ruff.js").then(({ startLinter }) => startLinter()));
const LINT_STARTERS = ["focusin", "input", "keydown"];
const pools = new Map(); // base -> {runners: [{runner, busy}], waiters: [resolve], relay}

function poolFor(base, relay) {
  if (!pools.has(base)) pools.set(base, { runners: [], waiters: [], relay: relay || [] });
  return pools.get(base);
}

/** An idle runtime for `base`: an existing one, a new one, or (all busy) null. */
function idleRuntime(base) {
  const pool = poolFor(base);
  const idle = pool.runners.find((entry) => !entry.busy);
  if (idle) return idle;
  if (pool.runners.length < MAX_RUNTIMES) {
    const entry = { runner: new Runner({ base, relay: pool.relay }), busy: false };
    pool.runners.push(entry);
    return entry;
  }
  return null;
}

/** A runtime for one run; null if `signal` aborts while every runtime is busy. */
async function acquireRuntime(base, onWait, signal) {
  for (;;) {
    const entry = idleRuntime(base);
    if (entry) {
      entry.busy = true;
      return entry;
    }
    if (signal.aborted) return null;
    onWait();
    await new Promise((resolve) => {
      poolFor(base).waiters.push(resolve);
      signal.addEventListener("abort", resolve, { once: true });
    });
  }
}

function releaseRuntime(base, entry) {
  if (!entry) return;
  entry.busy = false;
  const waiter = poolFor(base).waiters.shift();
  if (waiter) waiter();
}

/** Define the <wasm-runner> element for scripts served from `base`; `relay`: see Runner. */
export function defineRunnerElement({ base, name = "wasm-runner", relay = [] } = {}) {
  if (customElements.get(name)) return;
  poolFor(base, relay); // the URLs of Pyodide's large files, fetched by this page for the frame

  class WasmRunnerElement extends HTMLElement {
    connectedCallback() {
      if (this.shadowRoot) return;
      const root = this.attachShadow({ mode: "open" });
      let code = this.getAttribute("code") ?? dedent(this.textContent || "");
      const readOnly = this.hasAttribute("readonly");
      root.innerHTML = `<style>${STYLE}</style>
        <link rel="stylesheet" href="${new URL("./katex.css", import.meta.url)}">
        <div class="code" part="code"></div>
        <div class="bar" part="bar">
          <button class="run" type="button" aria-label="Run this Python example">Run</button>
          <button class="stop" type="button" disabled aria-label="Stop the running example">Stop</button>
          <span class="state" role="status"></span>
        </div>
        <div class="output" part="output" role="region" tabindex="0" aria-live="off" aria-label="Output of the example"></div>
        <div class="sr" role="status" aria-live="polite"></div>
        <form hidden><label class="prompt" for="line">Input</label><input id="line" type="text" autocomplete="off"><button type="submit">Send</button></form>`;
      this.view = new OutputView(root.querySelector(".output"), { live: root.querySelector(".sr") });
      this.getCode = () => code;
      const codeBox = root.querySelector(".code");
      if (readOnly) {
        const pre = document.createElement("pre");
        pre.textContent = code;
        codeBox.appendChild(pre);
      } else {
        const lint = this.getAttribute("lint") !== "off";
        const label = "Python example code. Tab indents; press Escape then Tab to leave it. Control+Enter runs."
          + (lint ? " Control+Shift+M lists the problems marked while you type, F8 goes to the next." : "");
        import("./editor.js").then(({ createEditor }) => {
          const editor = createEditor(codeBox, { doc: code, root, label, onRun: () => this.run({ fromEditor: true }) });
          this.getCode = editor.getCode;
          this.editor = editor;
          if (lint) this.lintOnceUsed(editor);
        });
      }
      root.querySelector(".run").addEventListener("click", () => this.run());
      root.querySelector(".stop").addEventListener("click", () => this.stop());
      // Esc stops a running example from anywhere inside it (editor, buttons, input line, output).
      root.addEventListener("keydown", (event) => {
        if (event.key === "Escape" && this.abort) this.stop();
      }, true);
      const entry = idleRuntime(base);
      this.runner = entry ? entry.runner : poolFor(base).runners[0].runner; // the runtime it will most likely use
      if (this.hasAttribute("exercise")) this.mountExercise(root, (text) => { code = text; });
      if (this.tier() !== "server") this.runner.prefetch();
    }

    mountExercise(root, keep) {
      const style = document.createElement("style");
      style.textContent = CHECK_STYLE;
      root.append(style);
      const [runButton, stopButton, state] = [".run", ".stop", ".state"].map((s) => root.querySelector(s));
      this.exercise = mountExercise({
        ref: this.getAttribute("exercise"), base, runner: this.runner, bar: root.querySelector(".bar"),
        runButton, instructionsBefore: root.querySelector(".code"), resultsAfter: root.querySelector(".output"),
        live: state, getCode: () => this.getCode(), tier: () => this.tier(),
        lang: () => this.language(), // a check's explanation
        setCode: (text) => {
          keep(text);
          if (this.editor) this.editor.setCode(text);
          const pre = root.querySelector(".code pre");
          if (pre) pre.textContent = text;
        },
        onBusy: (on, abort) => {
          runButton.disabled = on;
          stopButton.disabled = !on;
          this.abort = on ? abort : null;
        },
      });
    }

    /** The language of explanations and lint marks: the element's `lang`, else the nearest around it, else the page's. */
    language() {
      return (this.closest("[lang]") || document.documentElement).lang || null;
    }

    /**
     * Mark mistakes while the student types, once the editor is first focused or edited: the
     * page's one linter (loadLinter), worded in this example's language at each check.
     * `lintFindings` and a `lint` event ({detail: findings}) give the page the latest findings.
     */
    lintOnceUsed(editor) {
      const start = () => {
        for (const type of LINT_STARTERS) editor.view.dom.removeEventListener(type, start);
        loadLinter().then(({ check }) => editor.attachLint((text) => check(text, this.language()), {
          onFindings: (findings) => {
            this.lintFindings = findings;
            this.dispatchEvent(new CustomEvent("lint", { detail: findings }));
          },
        })).catch((error) => {
          const state = this.shadowRoot.querySelector(".state");
          if (!state.textContent) state.textContent = "The checker could not load; Run still works.";
          console.warn("wasm-runner: the checker could not load (a page with a CSP must allow this runner's origin "
            + "in script-src and connect-src, and 'wasm-unsafe-eval' in script-src):", error);
        });
      };
      for (const type of LINT_STARTERS) editor.view.dom.addEventListener(type, start);
    }

    tier() {
      const tier = this.getAttribute("tier");
      return ["browser", "server", "auto"].includes(tier) ? tier : "browser";
    }

    limits() {
      const limits = {};
      const wall = parseFloat(this.getAttribute("wall-seconds"));
      const output = parseInt(this.getAttribute("output-bytes"), 10);
      if (Number.isFinite(wall)) limits.wall_seconds = wall;
      if (Number.isFinite(output)) limits.stdout_bytes = output;
      return limits;
    }

    /** Run the snippet; resolves with the result object. */
    async run({ fromEditor = false } = {}) {
      if (this.abort) return null;
      const root = this.shadowRoot;
      const [runButton, stopButton, state] = [".run", ".stop", ".state"].map((s) => root.querySelector(s));
      const abort = new AbortController();
      const ended = new AbortController();
      this.abort = abort;
      runButton.disabled = true;
      stopButton.disabled = false;
      state.textContent = "Running…";
      this.view.clear();
      const form = root.querySelector("form");
      const entry = await acquireRuntime(base, () => {
        state.textContent = "Waiting for another example on this page to finish (stop it or answer its input)…";
      }, abort.signal);
      if (entry) this.runner = entry.runner;
      let result;
      try {
        if (!entry || abort.signal.aborted) {
          result = { status: "cancelled", exit_code: null, stdout: "", stderr: "", outputs: [], wall_ms: 0, message: "The run was stopped.", limit: null, tier: this.tier() };
        } else {
          state.textContent = "Running…";
          result = await entry.runner.run(this.getCode(), {
            tier: this.tier(),
            limits: this.limits(),
            stdin: this.getAttribute("stdin"),
            filename: STUDENT_FILENAME,
            // the explanation's language: the element's lang, else the page's (docs/explanations.md)
            lang: this.language(),
            functions: this.exposed || new Map(),
            signal: abort.signal,
            onOutput: ({ stream, text }) => this.view.text(stream, text),
            onRich: (output) => this.view.rich(output),
            onInput: async (prompt) => {
              state.textContent = "Waiting for input";
              this.view.flush();
              const line = await askLine(form, root.querySelector(".prompt"), root.querySelector("input"), prompt, ended.signal);
              if (line !== null && !ended.signal.aborted) this.view.echo(line);
              if (!ended.signal.aborted) state.textContent = "Running…";
              return line;
            },
          });
        }
      } finally {
        ended.abort();
        releaseRuntime(base, entry);
      }
      this.view.end(result);
      if (this.editor && this.editor.markSpan) this.editor.markSpan(result.explanation ? result.explanation.span : null);
      state.textContent = "";
      runButton.disabled = false;
      stopButton.disabled = true;
      this.abort = null;
      const active = root.activeElement;
      if (fromEditor && this.editor) this.editor.focus();
      else if (!active || active === stopButton || active === runButton || active === root.querySelector("input")) root.querySelector(".output").focus();
      this.lastResult = result;
      this.dispatchEvent(new CustomEvent("result", { detail: result }));
      return result;
    }

    stop() {
      if (this.abort) this.abort.abort();
    }

    /** Functions of this page the snippet may call (browser tier); `null` removes one. */
    expose(functions) {
      if (!this.exposed) this.exposed = new Map();
      exposeInto(this.exposed, functions);
      return this;
    }
  }

  customElements.define(name, WasmRunnerElement);
}

function dedent(text) {
  const lines = text.replace(/^\n+|\s+$/g, "").split("\n");
  const indents = lines.filter((l) => l.trim()).map((l) => l.match(/^ */)[0].length);
  const cut = indents.length ? Math.min(...indents) : 0;
  return lines.map((l) => l.slice(cut)).join("\n");
}
