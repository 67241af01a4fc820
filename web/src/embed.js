// <wasm-runner>: a runnable Python snippet for course pages. One script tag defines it:
//   <script type="module" src="https://runner.example/embed.js"></script>
//   <wasm-runner tier="browser" wall-seconds="5" readonly>print("hello")</wasm-runner>
// Attributes: tier (browser|server|auto), readonly, code (else the element's text),
// wall-seconds, output-bytes, stdin.
import { Runner } from "./client.js";
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
form { display: flex; gap: .4rem; padding: .4rem .6rem; background: #eef3fd; }
form[hidden] { display: none; }
input { flex: 1; min-width: 0; font: inherit; padding: .25rem .4rem; }
`;

const runners = new Map();

function sharedRunner(base) {
  if (!runners.has(base)) runners.set(base, new Runner({ base }));
  return runners.get(base);
}

/** Define the <wasm-runner> element for scripts served from `base`. */
export function defineRunnerElement({ base, name = "wasm-runner" } = {}) {
  if (customElements.get(name)) return;

  class WasmRunnerElement extends HTMLElement {
    connectedCallback() {
      if (this.shadowRoot) return;
      const root = this.attachShadow({ mode: "open" });
      const code = this.getAttribute("code") ?? dedent(this.textContent || "");
      const readOnly = this.hasAttribute("readonly");
      root.innerHTML = `<style>${STYLE}</style>
        <div class="code" part="code"></div>
        <div class="bar" part="bar">
          <button class="run" type="button" aria-label="Run this Python example">Run</button>
          <button class="stop" type="button" disabled aria-label="Stop the running example">Stop</button>
          <span class="state" role="status"></span>
        </div>
        <div class="output" part="output" tabindex="0" aria-live="polite" aria-label="Output of the example"></div>
        <form hidden><label class="prompt" for="line">Input</label><input id="line" type="text" autocomplete="off"><button type="submit">Send</button></form>`;
      this.runner = sharedRunner(base);
      this.view = new OutputView(root.querySelector(".output"));
      this.getCode = () => code;
      const codeBox = root.querySelector(".code");
      if (readOnly) {
        const pre = document.createElement("pre");
        pre.textContent = code;
        codeBox.appendChild(pre);
      } else {
        import("./editor.js").then(({ createEditor }) => {
          const editor = createEditor(codeBox, { doc: code, root, label: "Python example code", onRun: () => this.run() });
          this.getCode = editor.getCode;
        });
      }
      root.querySelector(".run").addEventListener("click", () => this.run());
      root.querySelector(".stop").addEventListener("click", () => this.abort && this.abort.abort());
      if (this.tier() !== "server") this.runner.prefetch();
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
    async run() {
      if (this.abort) return null;
      const root = this.shadowRoot;
      const [runButton, stopButton, state] = [".run", ".stop", ".state"].map((s) => root.querySelector(s));
      this.abort = new AbortController();
      runButton.disabled = true;
      stopButton.disabled = false;
      state.textContent = "Running…";
      this.view.clear();
      const form = root.querySelector("form");
      const result = await this.runner.run(this.getCode(), {
        tier: this.tier(),
        limits: this.limits(),
        stdin: this.getAttribute("stdin"),
        signal: this.abort.signal,
        onOutput: ({ stream, text }) => this.view.text(stream, text),
        onRich: (output) => this.view.rich(output),
        onInput: async (prompt) => {
          const line = await askLine(form, root.querySelector(".prompt"), root.querySelector("input"), prompt, this.abort.signal);
          if (line !== null) this.view.echo(line);
          return line;
        },
      });
      this.view.end(result);
      state.textContent = "";
      runButton.disabled = false;
      stopButton.disabled = true;
      this.abort = null;
      this.lastResult = result;
      this.dispatchEvent(new CustomEvent("result", { detail: result }));
      return result;
    }

    stop() {
      if (this.abort) this.abort.abort();
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
