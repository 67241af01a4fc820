// The playground page's glue: editor, Run/Stop, tier choice, streaming output, input line, share.
import { Runner } from "./client.js";
import { askLine, OutputView } from "./render.js";
import { decodeCode, encodeCode } from "./share.js";

const config = JSON.parse(document.getElementById("playground-config").textContent);
const $ = (id) => document.getElementById(id);
const runButton = $("run");
const stopButton = $("stop");
const tierSelect = $("tier");
const stateText = $("state");
const view = new OutputView($("output"));

const SAMPLE = `# Runs in your browser (Pyodide), isolated from this page.
name = input("What is your name? ")
print(f"Hello, {name}!")

total = sum(i * i for i in range(1, 11))
print("Sum of squares 1..10 =", total)
`;

let current = null; // the run in progress: {abort: AbortController}

const storedTier = new URLSearchParams(location.search).get("tier");
tierSelect.value = ["auto", "browser", "server"].includes(storedTier) ? storedTier : config.tier;

const runner = new Runner({ base: new URL(config.base, location.href).href, tier: tierSelect.value });
runner.onReady = (info) => {
  if (!current) stateText.textContent = "Ready";
  const notes = [`Browser runtime: ${info.runtime}`, info.shared ? "cross-origin isolated" : "not isolated (Stop restarts Python)"];
  if (!info.interactive) notes.push("input() reads stdin given up front only");
  $("where").textContent = notes.join(" · ");
};

// Start the sandbox frame and Pyodide before the editor bundle is even fetched.
if (tierSelect.value !== "server") runner.prefetch();
const { createEditor } = await import("./editor.js");

const editor = createEditor($("editor"), {
  doc: (await decodeCode(location.hash)) ?? SAMPLE,
  label: "Python code editor. Press Tab to leave it, Control+Enter to run.",
  onRun: () => start(),
});

async function start() {
  if (current) return;
  const abort = new AbortController();
  current = { abort };
  runButton.disabled = true;
  stopButton.disabled = false;
  stateText.textContent = "Running…";
  view.clear();
  const result = await runner.run(editor.getCode(), {
    tier: tierSelect.value,
    signal: abort.signal,
    onOutput: ({ stream, text }) => view.text(stream, text),
    onRich: (output) => view.rich(output),
    onInput: async (prompt) => {
      stateText.textContent = "Waiting for input";
      const line = await askLine($("input-form"), $("input-label"), $("input-box"), prompt, abort.signal);
      if (line !== null) view.echo(line);
      stateText.textContent = "Running…";
      return line;
    },
  });
  view.end(result);
  stateText.textContent = result.status === "ok" ? "Done" : result.status;
  current = null;
  runButton.disabled = false;
  stopButton.disabled = true;
  document.body.dataset.lastStatus = result.status;
  window.lastResult = result;
}

runButton.addEventListener("click", () => start());
stopButton.addEventListener("click", () => {
  if (current) {
    stateText.textContent = "Stopping…";
    current.abort.abort();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    start();
  } else if (event.key === "Escape" && current) {
    current.abort.abort();
  }
});
tierSelect.addEventListener("change", () => {
  runner.tier = tierSelect.value;
  if (tierSelect.value !== "server") runner.prefetch();
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

window.playground = { runner, editor, start };
