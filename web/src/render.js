// Shows a run's output in an element, the same way for both tiers: streamed text (stdout and
// stderr in the order written), images, and one plain-language end line.
//
// A program that prints without end must not hurt the page: text is queued and drawn once per
// animation frame; only the last MAX_DOM_CHARS characters stay in the document ("earlier output
// hidden — N lines", the whole output stays downloadable); the screen-reader live region gets
// short summaries, never the flood itself.

import { describeFigure, describeTurtleDrawing } from "./alt-text.js";
import { END_LINES } from "./tiers.js";

export const MAX_DOM_CHARS = 60000; // characters kept on screen
const MAX_KEPT_CHARS = 32 << 20; // characters kept for the download
const FRAME_FALLBACK_MS = 100; // when animation frames do not come (hidden tab)
const ANNOUNCE_MS = 1000; // at most one live-region update a second while output flows
const ANNOUNCE_CHARS = 160;

// A Jupyter MIME bundle (display(obj), a cell's last value: wasm_runner/guest/rich.py) is one
// output of this mime, its data {"data": {mime: data}, "metadata": {}} as JSON text. It is shown
// as a notebook shows it: the richest type this page renders. HTML is sanitised (DOMPurify) and
// LaTeX typeset (KaTeX), both from dist/rich.js, loaded the first time a bundle needs it.
export const BUNDLE_MIME = "application/vnd.wasm-runner.bundle+json";
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;
let richModule = null;

function loadRich() {
  richModule ||= import("./rich.js");
  return richModule;
}

function textBlock(text, className = "out-value") {
  const pre = document.createElement("pre");
  pre.className = className;
  pre.textContent = text;
  return pre;
}

/** The element showing a bundle output, or null when it holds nothing to show. `trustHtml`:
 * the operator trusts the programs' HTML ([server] trust_html): shown as made, not sanitised. */
export function showBundle(output, { trustHtml = false } = {}) {
  let data;
  try {
    data = JSON.parse(output.data).data;
  } catch {
    return null;
  }
  if (!data || typeof data !== "object") return null;
  const plain = typeof data["text/plain"] === "string" ? data["text/plain"] : "";
  for (const mime of ["image/png", "image/jpeg"]) {
    if (typeof data[mime] === "string" && BASE64.test(data[mime])) {
      const img = document.createElement("img");
      img.src = `data:${mime};base64,${data[mime].replace(/\s/g, "")}`;
      img.alt = plain || "Image produced by the program";
      img.className = "out-image";
      return img;
    }
  }
  if (typeof data["image/svg+xml"] === "string") {
    const img = document.createElement("img"); // an <img>: no script in the SVG ever runs
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(data["image/svg+xml"])}`;
    img.alt = plain || "Drawing produced by the program";
    img.className = "out-image out-svg";
    return img;
  }
  const later = (className, fill) => {
    const box = document.createElement("div");
    box.className = className;
    box.append(textBlock(plain)); // until rich.js is loaded, and if it cannot be
    loadRich().then((rich) => {
      const made = document.createElement("div");
      fill(rich, made);
      box.replaceChildren(...made.childNodes);
    }, () => {});
    return box;
  };
  if (typeof data["text/html"] === "string" && trustHtml) {
    const box = document.createElement("div");
    box.className = "out-html";
    const template = document.createElement("template");
    template.innerHTML = data["text/html"];
    box.append(template.content);
    return box;
  }
  if (typeof data["text/html"] === "string") {
    return later("out-html", (rich, made) => made.append(rich.sanitizedHtml(data["text/html"])));
  }
  if (typeof data["text/latex"] === "string") {
    return later("out-latex", (rich, made) => rich.renderLatex(data["text/latex"], made));
  }
  if (typeof data["text/markdown"] === "string") return textBlock(data["text/markdown"], "out-value out-markdown");
  if (data["application/json"] !== undefined) return textBlock(JSON.stringify(data["application/json"], null, 2));
  return plain ? textBlock(plain) : null;
}

export class OutputView {
  /**
   * @param {HTMLElement} element  the output panel (not a live region itself)
   * @param {{live?: HTMLElement, trustHtml?: boolean}} [options]  a polite live region for short
   *   announcements; trustHtml: the operator trusts the programs' HTML (shown unsanitised)
   */
  constructor(element, { live = null, trustHtml = false } = {}) {
    this.element = element;
    this.live = live;
    this.trustHtml = trustHtml;
    this.clear();
  }

  clear() {
    this.element.replaceChildren();
    this.figures = 0; // figures of this run, numbered in their alternatives
    this.queue = []; // [{stream, text}] waiting for the next frame
    this.queued = 0;
    this.spans = []; // [{node, stream}] on screen, oldest first
    this.onScreen = 0; // characters on screen
    this.hiddenLines = 0;
    this.hiddenNote = null;
    this.transcript = []; // everything, for the download
    this.kept = 0;
    this.lostChars = 0;
    this.frame = null;
    this.lastSpan = null;
    this.heard = "";
    this.heardChars = 0;
    this.announceTimer = null;
    this.floodAnnounced = false;
    this.lines = 0;
  }

  /** Queue text of `stream`; it is drawn at the next animation frame. */
  text(stream, text) {
    if (!text) return;
    const last = this.queue[this.queue.length - 1];
    if (last && last.stream === stream) last.text += text;
    else this.queue.push({ stream, text });
    this.queued += text.length;
    if (this.kept + text.length <= MAX_KEPT_CHARS) {
      this.transcript.push(text);
      this.kept += text.length;
    } else {
      this.lostChars += text.length;
    }
    this.hear(text);
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    const draw = () => {
      if (!this.frame) return;
      cancelAnimationFrame(this.frame.raf);
      clearTimeout(this.frame.timer);
      this.frame = null;
      this.draw();
    };
    this.frame = { raf: requestAnimationFrame(draw), timer: setTimeout(draw, FRAME_FALLBACK_MS) };
  }

  /** Draw everything queued now (the end line calls this first). */
  flush() {
    if (this.frame) {
      cancelAnimationFrame(this.frame.raf);
      clearTimeout(this.frame.timer);
      this.frame = null;
    }
    this.draw();
  }

  draw() {
    if (!this.queue.length) return;
    const stick = this.atBottom();
    let queue = this.queue;
    this.queue = [];
    this.queued = 0;
    // Only the tail of a huge batch can stay on screen: skip the rest without building nodes.
    let total = 0;
    for (const chunk of queue) total += chunk.text.length;
    if (total > MAX_DOM_CHARS) {
      let drop = total - MAX_DOM_CHARS;
      const kept = [];
      for (const chunk of queue) {
        if (drop >= chunk.text.length) {
          this.hiddenLines += countLines(chunk.text);
          drop -= chunk.text.length;
          continue;
        }
        if (drop > 0) {
          const cut = lineCut(chunk.text, drop);
          this.hiddenLines += countLines(chunk.text.slice(0, cut));
          kept.push({ stream: chunk.stream, text: chunk.text.slice(cut) });
          drop = 0;
        } else {
          kept.push(chunk);
        }
      }
      queue = kept;
      this.dropAll();
    }
    const fragment = document.createDocumentFragment();
    for (const chunk of queue) {
      if (!chunk.text) continue;
      this.lines += countLines(chunk.text);
      if (this.lastSpan && this.lastSpan.stream === chunk.stream && this.lastSpan.node.isConnected) {
        this.lastSpan.node.appendData ? this.lastSpan.node.appendData(chunk.text) : (this.lastSpan.node.textContent += chunk.text);
        this.lastSpan.length += chunk.text.length;
      } else {
        const span = document.createElement("span");
        span.className = `out-${chunk.stream}`;
        span.dataset.stream = chunk.stream;
        const node = document.createTextNode(chunk.text);
        span.appendChild(node);
        fragment.appendChild(span);
        this.lastSpan = { span, node, stream: chunk.stream, length: chunk.text.length };
        this.spans.push(this.lastSpan);
      }
      this.onScreen += chunk.text.length;
    }
    this.element.appendChild(fragment);
    this.trim();
    if (stick) this.element.scrollTop = this.element.scrollHeight;
  }

  /** Drop the oldest text until at most MAX_DOM_CHARS are on screen, whole lines at a time. */
  trim() {
    while (this.onScreen > MAX_DOM_CHARS && this.spans.length) {
      const first = this.spans[0];
      const excess = this.onScreen - MAX_DOM_CHARS;
      const text = first.node.data;
      if (excess >= text.length) {
        this.hiddenLines += countLines(text);
        this.onScreen -= text.length;
        first.span.remove();
        this.spans.shift();
        if (this.lastSpan === first) this.lastSpan = null;
      } else {
        const cut = lineCut(text, excess);
        this.hiddenLines += countLines(text.slice(0, cut));
        first.node.deleteData(0, cut);
        first.length -= cut;
        this.onScreen -= cut;
        break;
      }
    }
    if (this.hiddenLines) this.showHiddenNote();
  }

  dropAll() {
    for (const { span, node } of this.spans) {
      this.hiddenLines += countLines(node.data);
      span.remove();
    }
    this.spans = [];
    this.onScreen = 0;
    this.lastSpan = null;
  }

  showHiddenNote() {
    if (!this.hiddenNote) {
      const note = document.createElement("div");
      note.className = "out-hidden";
      const text = document.createElement("span");
      const link = document.createElement("button");
      link.type = "button";
      link.className = "out-download";
      link.textContent = "Download all output";
      link.addEventListener("click", () => this.download());
      note.append(text, " ", link);
      this.hiddenNote = { note, text };
      this.element.prepend(note);
    }
    const n = this.hiddenLines;
    this.hiddenNote.text.textContent = `Earlier output hidden — ${n.toLocaleString("en")} line${n === 1 ? "" : "s"}.`;
  }

  /** The whole output as text (what the download holds). */
  fullText() {
    const lost = this.lostChars ? `\n[${this.lostChars} more characters were not kept]\n` : "";
    return this.transcript.join("") + lost;
  }

  download() {
    const url = URL.createObjectURL(new Blob([this.fullText()], { type: "text/plain;charset=utf-8" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = "output.txt";
    a.style.display = "none";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  atBottom() {
    const el = this.element;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  }

  /** Short announcements: the first lines of output, then "more output", never the flood. */
  hear(text) {
    if (!this.live) return;
    this.heardChars += text.length;
    if (this.heard.length < ANNOUNCE_CHARS) this.heard += text.slice(0, ANNOUNCE_CHARS - this.heard.length);
    if (this.announceTimer) return;
    this.announceTimer = setTimeout(() => {
      this.announceTimer = null;
      if (!this.heardChars) return;
      let say;
      if (this.heardChars <= ANNOUNCE_CHARS) say = this.heard;
      else if (!this.floodAnnounced) {
        this.floodAnnounced = true;
        say = "The program is printing a lot of output; it is not read aloud. Press Escape to stop it.";
      }
      this.heard = "";
      this.heardChars = 0;
      if (say) this.live.textContent = say;
    }, ANNOUNCE_MS);
  }

  rich(output) {
    this.flush();
    if (output.kind === "image" && /^image\/(png|jpeg|gif|webp)$/.test(output.mime)) {
      const img = document.createElement("img");
      img.src = `data:${output.mime};base64,${output.data}`;
      this.figures += 1;
      img.alt = describeFigure(this.figures);
      img.className = "out-image";
      this.element.appendChild(img);
    } else if (output.kind === "image" && output.mime === "image/svg+xml") {
      const img = document.createElement("img"); // an <img>: no script in the SVG ever runs
      img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(output.data)}`;
      img.alt = describeTurtleDrawing(output.data);
      img.className = "out-image out-svg";
      this.element.appendChild(img);
    } else if (output.mime === BUNDLE_MIME) {
      const shown = showBundle(output, { trustHtml: this.trustHtml });
      if (shown) this.element.appendChild(shown);
    } else if (output.kind === "text" || output.kind === "table") {
      const pre = document.createElement("pre");
      pre.textContent = output.data;
      this.element.appendChild(pre);
    }
    this.lastSpan = null;
  }

  echo(text) {
    this.text("stdin", `${text}\n`);
  }

  /** The end line; `extra` may add a note (e.g. why a package is missing) with actions. */
  end(result, { actions = [] } = {}) {
    this.flush();
    clearTimeout(this.announceTimer);
    this.announceTimer = null;
    const { text, detail } = endLine(result);
    const line = document.createElement("div");
    line.className = `out-end status-${result.status}`;
    line.textContent = text;
    this.element.appendChild(line);
    if (detail || actions.length) {
      const note = document.createElement("div");
      note.className = "out-note";
      if (detail) note.append(detail);
      for (const { label, run } of actions) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "out-action";
        button.textContent = label;
        button.addEventListener("click", run);
        note.append(" ", button);
      }
      this.element.appendChild(note);
    }
    const explained = this.explain(result.explanation);
    this.lastSpan = null;
    this.element.scrollTop = this.element.scrollHeight;
    if (this.live) this.live.textContent = [text, detail, explained].filter(Boolean).join(" ");
    return text;
  }

  /** A run's explanation (docs/explanations.md) under its end line; returns what it says, as text. */
  explain(explanation) {
    if (!explanation || !explanation.title) return "";
    const box = document.createElement("div");
    box.className = "out-explain";
    box.dataset.explanation = explanation.id;
    if (explanation.lang) box.lang = explanation.lang;
    const title = document.createElement("strong");
    title.className = "out-explain-title";
    title.textContent = explanation.title;
    const text = document.createElement("p");
    text.className = "out-explain-text";
    text.textContent = explanation.text;
    const hint = document.createElement("p");
    hint.className = "out-explain-hint";
    hint.textContent = explanation.hint;
    box.append(title, text, hint);
    this.element.appendChild(box);
    return `${title.textContent}. ${explanation.text} ${explanation.hint}`;
  }
}

function countLines(text) {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n += 1;
  return n;
}

/** Where to cut `text` to drop at least `chars` characters: just after a newline when there is one. */
function lineCut(text, chars) {
  const newline = text.indexOf("\n", chars - 1);
  return newline === -1 || newline - chars > 200 ? chars : newline + 1;
}

// Numbers in an end line, written as wasm_runner/tiers.py writes them (tests/test_tiers.py).
const missing = (x) => typeof x !== "number" || !Number.isFinite(x);
const FORMATS = {
  seconds: (s) => (missing(s) ? "the time limit" : s >= 120 && s % 60 === 0 ? `${s / 60} minutes` : `${s} second${s === 1 ? "" : "s"}`),
  bytes: (n) => {
    if (missing(n)) return "the limit";
    if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)} MB`;
    if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KB`;
    return `${n} byte${n === 1 ? "" : "s"}`;
  },
  mb: (x) => (missing(x) ? "the allowed amount" : `${x} MB`),
  files: (n) => (missing(n) ? "the allowed number of files" : `${n} file${n === 1 ? "" : "s"}`),
};

function elapsedText(result) {
  const ms = Math.max(0, (result.wall_ms || 0) - (result.input_wait_ms || 0));
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

/** "in your browser, Python 3.14" / "on the server, Python 3.15" */
export function whereText(result) {
  const where = result.tier === "server" ? "on the server" : result.tier === "browser" ? "in your browser" : "";
  const python = result.python ? `Python ${result.python}` : "";
  return [where, python].filter(Boolean).join(", ");
}

/**
 * The plain-language end line for a result, the same for both tiers:
 * {sentence, text (sentence + where it ran + time), detail (a second sentence, or "")}.
 */
export function endLine(result) {
  const limits = result.limits || {};
  const refused = result.refused && typeof result.refused.text === "string" ? result.refused : null;
  const sentence = refused ? refused.sentence : endSentence(result, limits);
  const where = whereText(result);
  const text = `${sentence} — ${where ? `${where} · ` : ""}${elapsedText(result)}`;
  let detail = "";
  const missing = result.missing;
  if (refused) {
    detail = refused.text; // for the page's author: a setting of theirs, not a fault of the server
  } else if (missing && missing.sentence) {
    detail = missing.sentence; // the server tier's words: the tier that has it, or none
  } else if (missing) {
    const index = missing.index ? ` (${missing.index})` : "";
    detail = missing.reason === "unreachable"
      ? `The package “${missing.package || missing.module}” could not be downloaded: the browser's package index${index} could not be reached.`
      : `“${missing.module}” is not in the browser's package index${index}.`;
  } else if (["internal_error", "invalid_input"].includes(result.status) && result.message) {
    detail = result.message;
  }
  return { sentence, text, detail };
}

/** Which of END_LINES a result gets: the same choice as wasm_runner/tiers.py's end_line_key. */
function endLineKey(result) {
  const status = result.status;
  if (status === "error") {
    if (result.limit === "stack") return "error_stack";
    return result.exit_code === null || result.exit_code === undefined || result.exit_code === 1 ? "error" : "error_exit";
  }
  if (status === "output_limit") {
    return result.stderr_truncated && !result.stdout_truncated ? "output_limit_stderr" : "output_limit";
  }
  if (status === "timeout" && result.limit === "input_wait") return "input_wait";
  return Object.hasOwn(END_LINES, status) ? status : "internal_error";
}

function endSentence(result, limits) {
  const values = { ...limits, exit_code: result.exit_code };
  return END_LINES[endLineKey(result)].replace(/\{(\w+)(?::(\w+))?\}/g, (_, name, kind) => {
    const value = values[name];
    return kind ? FORMATS[kind](value) : missing(value) ? "?" : `${value}`;
  });
}

/**
 * Ask for one line through a small form; resolves with the text, or null when `signal` aborts
 * (Stop, or the run ended): the form then closes and a late answer goes nowhere.
 */
export function askLine(form, label, input, prompt, signal) {
  return new Promise((resolve) => {
    if (signal && signal.aborted) {
      resolve(null);
      return;
    }
    label.textContent = prompt.trim() ? prompt.trim() : "Input";
    form.hidden = false;
    input.value = "";
    input.focus();
    const done = (value) => {
      form.hidden = true;
      form.removeEventListener("submit", onSubmit);
      if (signal) signal.removeEventListener("abort", onAbort);
      resolve(value);
    };
    const onSubmit = (event) => {
      event.preventDefault();
      done(input.value);
    };
    const onAbort = () => done(null);
    form.addEventListener("submit", onSubmit);
    if (signal) signal.addEventListener("abort", onAbort);
  });
}
