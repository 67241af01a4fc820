// Exercises in the page: load one, check the student's code in the browser (Pyodide) or on the
// server, and show the result as one row per check. The browser tier runs the same plan as the
// server (wasm_runner/exercises/checker.py): one fresh run per I/O case, compared here, and one
// run of the shared harness per test function, whose report comes back as a rich output that
// carries the run's random nonce. In the browser every check, hidden ones too, is on the
// student's machine: a student can read them and make this page say anything. It is practice
// feedback; grading that counts uses tier="server", where hidden checks never leave the server.
import { fetchServerJson } from "./client.js";
import { HARNESS_PROGRAM } from "./pylib.js";

export const CHECK_MIME = "application/vnd.wasm-runner.check+json";
const STUDENT_FILE = "solution.py";
const MAX_SHOWN_LINES = 20;
const MAX_SHOWN_CHARS = 1500;

/**
 * Load an exercise: a bundle URL (…json: every check, for the browser), or an id on `base`'s
 * server, whose public view (title, instructions, starter, whether the browser may check it)
 * every tier can show. `source` says which: "bundle" or "server".
 */
export async function loadExercise(ref, { base, headers = {} } = {}) {
  const isUrl = /^(https?:|\/|\.)/.test(ref) || ref.endsWith(".json");
  if (!isUrl) {
    const url = new URL(`api/exercises/${encodeURIComponent(ref)}`, base);
    const { response, body } = await fetchServerJson(base, url, { headers });
    return { ...checkedBody(ref, response, body), id: (body && body.id) || ref, source: "server" };
  }
  let response;
  try {
    response = await fetch(new URL(ref, location.href).href);
  } catch (error) {
    throw new Error(`could not load exercise ${ref}: ${error.message}`);
  }
  const body = await response.json().catch(() => null);
  return { ...checkedBody(ref, response, body), id: (body && body.id) || ref, source: "bundle", browser: true };
}

/** The checks of a server exercise for the browser tier (only for one that allows it). */
export async function loadBundle(id, { base, headers = {} } = {}) {
  const url = new URL(`api/exercises/${encodeURIComponent(id)}/bundle`, base);
  const { response, body } = await fetchServerJson(base, url, { headers });
  return { ...checkedBody(id, response, body), id };
}

function checkedBody(ref, response, body) {
  if (!response.ok || !body || typeof body !== "object") {
    const why = body && body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
    throw new Error(`could not load exercise ${ref}: ${why}`);
  }
  return body;
}

function nonce() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Imports of the student's code, so the worker loads those packages for a harness run too. */
function importHint(code) {
  const names = new Set();
  for (const m of code.matchAll(/^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+))/gm)) {
    for (const part of (m[1] || m[2]).split(",")) {
      const name = part.trim().split(/\s+/)[0];
      if (/^[A-Za-z_][\w.]*$/.test(name)) names.add(name);
    }
  }
  if (!names.size) return "";
  return "\nif False:\n" + [...names].map((n) => `    import ${n}\n`).join("");
}

/** The runs that check `code` (same plan as the server's checker.plan). */
export function planChecks(bundle, code) {
  const specs = [];
  for (const c of bundle.io || []) {
    specs.push({ kind: "io", name: c.name, hidden: Boolean(c.hidden), code, stdin: c.stdin || "", filename: STUDENT_FILE, case: c });
  }
  const program = HARNESS_PROGRAM + importHint(code);
  for (const tf of bundle.tests || []) {
    const tests = tf.tests && tf.tests.length ? tf.tests : [null];
    for (const test of tests) {
      const n = nonce();
      const payload = { nonce: n, channel: "output", student: code, student_file: STUDENT_FILE,
        tests: tf.source, tests_file: tf.filename || "tests.py", test };
      specs.push({ kind: "test", name: test || tf.name, hidden: Boolean(tf.hidden), code: program,
        stdin: JSON.stringify(payload), filename: "<wasm-runner check>", nonce: n, test });
    }
  }
  return specs;
}

// -- comparing output (as checker.compare_output) --------------------------------------------
/** Python's repr() of a str, for messages identical to the server's. */
export function pyRepr(s) {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + quote;
}

/** Python's format(x, "g"). */
export function pyG(x) {
  if (x === 0) return "0";
  const exp = Math.floor(Math.log10(Math.abs(x)));
  if (exp < -4 || exp >= 6) {
    let [mant, e] = x.toExponential(5).split("e");
    mant = mant.includes(".") ? mant.replace(/0+$/, "").replace(/\.$/, "") : mant;
    const n = parseInt(e, 10);
    return `${mant}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
  }
  return String(parseFloat(x.toPrecision(6)));
}

function pyNumber(token) {
  if (!/^[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf(inity)?|nan)$/i.test(token.replace(/_/g, ""))) return null;
  const v = Number(token.replace(/_/g, ""));
  return Number.isFinite(v) ? v : null;
}

function isClose(a, b, tol) {
  return a === b || Math.abs(a - b) <= Math.max(tol * Math.max(Math.abs(a), Math.abs(b)), tol);
}

const rstrip = (s) => s.replace(/\s+$/, "");
const words = (s) => s.split(/\s+/).filter(Boolean);

export function compareOutput(c, got) {
  const want = c.stdout;
  const mode = c.compare || "lines";
  let a;
  let b;
  if (mode === "exact") {
    if (got === want) return [true, ""];
    a = got.split("\n");
    b = want.split("\n");
  } else if (mode === "lines") {
    a = rstrip(got).split("\n").map(rstrip);
    b = rstrip(want).split("\n").map(rstrip);
    if (a.length === b.length && a.every((x, i) => x === b[i])) return [true, ""];
  } else {
    const ta = words(got);
    const tb = words(want);
    if (mode === "whitespace") {
      if (ta.length === tb.length && ta.every((x, i) => x === tb[i])) return [true, ""];
    } else {
      const tol = c.tolerance ?? 1e-6;
      for (let i = 0; i < Math.min(ta.length, tb.length); i++) {
        const nx = pyNumber(ta[i]);
        const ny = pyNumber(tb[i]);
        const ok = nx !== null && ny !== null ? isClose(nx, ny, tol) : ta[i] === tb[i];
        if (!ok) return [false, `expected ${pyRepr(tb[i])}, got ${pyRepr(ta[i])}${ny !== null ? ` (tolerance ${pyG(tol)})` : ""}`];
      }
      if (ta.length === tb.length) return [true, ""];
    }
    if (ta.length !== tb.length) return [false, `expected ${tb.length} words, got ${ta.length}`];
    for (let i = 0; i < ta.length; i++) if (ta[i] !== tb[i]) return [false, `expected ${pyRepr(tb[i])}, got ${pyRepr(ta[i])}`];
    return [false, ""];
  }
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return [false, `line ${i + 1}: expected ${pyRepr(b[i])}, got ${pyRepr(a[i])}`];
  }
  if (a.length < b.length) return [false, `line ${a.length + 1}: expected ${pyRepr(b[a.length])}, got nothing more`];
  return [false, `line ${b.length + 1}: expected nothing more, got ${pyRepr(a[b.length])}`];
}

function block(text) {
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  if (!lines.length) return "    (nothing)";
  let cut = lines.length > MAX_SHOWN_LINES;
  let shown = lines.slice(0, MAX_SHOWN_LINES).map((l) => "    " + l).join("\n");
  if (shown.length > MAX_SHOWN_CHARS) {
    shown = shown.slice(0, MAX_SHOWN_CHARS);
    cut = true;
  }
  return shown + (cut ? "\n    ..." : "");
}

const LIMIT_HINT = {
  cpu: "Is there an infinite loop?",
  wall: "Is there an infinite loop, or is the program waiting for input it never gets?",
  memory: "Is a list or string growing without end?",
  output: "Is something printed in an endless loop?",
};

function stopped(res) {
  const msg = res.message || `The run ended with status ${res.status}.`;
  const hint = LIMIT_HINT[res.limit || ""];
  return hint ? `${msg} ${hint}` : msg;
}

/** The harness's report in a browser run: the one CHECK_MIME output holding the run's nonce. */
export function findRecord(spec, res) {
  if (!spec.nonce) return null;
  const records = [];
  for (const o of res.outputs || []) {
    if (!o || o.mime !== CHECK_MIME) continue;
    try {
      const rec = JSON.parse(o.data);
      if (rec && rec.nonce === spec.nonce && rec.test === spec.test) records.push(rec);
    } catch {
      // not a report
    }
  }
  return records.length === 1 ? records[0] : null;
}

/** One check's result from its run (as checker.judge). */
export function judgeCheck(spec, res, record = findRecord(spec, res)) {
  const out = { name: spec.name, kind: spec.kind, hidden: spec.hidden, passed: false, message: "", status: res.status, limit: res.limit ?? null };
  if (spec.kind === "io") {
    const c = spec.case;
    const stdinPart = c.stdin ? `Input:\n${block(c.stdin)}\n` : "";
    if (res.status !== "ok") {
      if (res.limit) out.message = stopped(res);
      else {
        let err = (res.stderr || "").replace(/^\n+|\n+$/g, "");
        if (err.length > MAX_SHOWN_CHARS) err = "..." + err.slice(-MAX_SHOWN_CHARS);
        out.message = err ? `${stdinPart}Your program stopped with an error:\n${block(err)}` : `${stdinPart}${stopped(res)}`;
      }
      return out;
    }
    const [same, diff] = compareOutput(c, res.stdout || "");
    out.passed = same;
    out.message = same ? "Output matches."
      : `${stdinPart}Expected output:\n${block(c.stdout)}\nYour output:\n${block(res.stdout || "")}` + (diff ? `\nFirst difference: ${diff}.` : "");
    return out;
  }
  if (record) {
    out.passed = record.passed === true && !(res.status !== "ok" && res.limit);
    out.message = record.passed === true ? "Test passed." : String(record.message || "Test failed.");
    return out;
  }
  if (res.limit || ["invalid_input", "internal_error", "cancelled"].includes(res.status)) out.message = stopped(res);
  else out.message = "The test did not report back: the program ended before the test finished (sys.exit or os._exit in your code?).";
  return out;
}

export function summarize(id, checks) {
  const passed = checks.filter((c) => c.passed).length;
  const total = checks.length;
  return {
    exercise: id, passed: total > 0 && passed === total, total, passed_count: passed, failed_count: total - passed,
    summary: `${passed} of ${total} checks passed` + (passed === total && total ? " — well done!" : "."),
    checks,
  };
}

/** Check `code` in the browser: the runs one after another through `runner` (client.js). */
export async function checkInBrowser(runner, bundle, code, { signal, onCheck, filename } = {}) {
  const limits = {};
  if (bundle.limits && bundle.limits.wall_seconds) limits.wall_seconds = bundle.limits.wall_seconds;
  if (bundle.limits && bundle.limits.stdout_bytes) limits.stdout_bytes = bundle.limits.stdout_bytes;
  const checks = [];
  for (const spec of planChecks(bundle, code)) {
    let res;
    if (signal && signal.aborted) {
      res = { status: "cancelled", message: "The check was stopped.", outputs: [], limit: null };
    } else {
      const options = { tier: "browser", stdin: spec.stdin, limits, signal };
      if (spec.kind === "io") options.filename = filename || STUDENT_FILE; // the harness names its own
      res = await runner.run(spec.code, options);
    }
    const check = judgeCheck(spec, res);
    checks.push(check);
    if (onCheck) onCheck(check);
  }
  return summarize(bundle.id, checks);
}

/** Check `code` on the server (hidden checks stay there): POST /api/exercises/{id}/check. */
export async function checkOnServer(base, id, code, { signal, headers = {} } = {}) {
  const { response, body } = await fetchServerJson(base, new URL(`api/exercises/${encodeURIComponent(id)}/check`, base), {
    method: "POST", signal, headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ code }),
  });
  if (!response.ok || !body || !Array.isArray(body.checks)) {
    const why = body && body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
    throw new Error(`the server could not check the code: ${why}`);
  }
  return body;
}

// -- showing it ------------------------------------------------------------------------------
/** The instructions without a first heading that only repeats the title (shown above them). */
export function withoutTitle(text, title) {
  const m = /^\s*#{1,6}\s+(.*?)\s*#*\s*(\n|$)/.exec(text || "");
  const norm = (t) => String(t || "").trim().replace(/\s+/g, " ").toLowerCase();
  return m && norm(m[1]) === norm(title) ? text.slice(m[0].length).replace(/^\s*\n/, "") : text || "";
}

/** A small, safe Markdown subset (headings, paragraphs, lists, code, emphasis) as DOM nodes. */
export function renderMarkdown(container, text) {
  container.textContent = "";
  const inline = (parent, line) => {
    const re = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*]+\*)/g;
    let last = 0;
    for (const m of line.matchAll(re)) {
      if (m.index > last) parent.append(line.slice(last, m.index));
      const t = m[0];
      const el = document.createElement(t.startsWith("`") ? "code" : t.startsWith("**") ? "strong" : "em");
      el.textContent = t.replace(/^(`|\*\*|\*)|(`|\*\*|\*)$/g, "");
      parent.append(el);
      last = m.index + t.length;
    }
    parent.append(line.slice(last));
  };
  const lines = text.split("\n");
  let para = null;
  let list = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      const pre = document.createElement("pre");
      const body = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
      pre.textContent = body.join("\n");
      container.append(pre);
      para = list = null;
      continue;
    }
    const heading = line.match(/^(#{1,4})\s+(.*)$/);
    const item = line.match(/^\s*[-*]\s+(.*)$/);
    if (heading) {
      const h = document.createElement(`h${Math.min(heading[1].length + 2, 6)}`);
      inline(h, heading[2]);
      container.append(h);
      para = list = null;
    } else if (item) {
      if (!list) {
        list = document.createElement("ul");
        container.append(list);
      }
      const li = document.createElement("li");
      inline(li, item[1]);
      list.append(li);
      para = null;
    } else if (!line.trim()) {
      para = list = null;
    } else {
      if (!para) {
        para = document.createElement("p");
        container.append(para);
      } else para.append(" ");
      inline(para, line);
      list = null;
    }
  }
}

/** The check results: a summary line (announced) and one row per check (✓/✗, message). */
export class CheckView {
  constructor(container, { live = null } = {}) {
    this.container = container;
    this.live = live;
    container.classList.add("checks");
    container.setAttribute("role", "region");
    container.setAttribute("aria-label", "Check results");
    this.clear();
  }

  clear() {
    this.container.textContent = "";
    this.summary = document.createElement("p");
    this.summary.className = "check-summary";
    this.summary.tabIndex = -1;
    this.where = document.createElement("p");
    this.where.className = "check-where";
    this.list = document.createElement("ul");
    this.list.className = "check-list";
    this.container.append(this.summary, this.where, this.list);
    this.container.hidden = true;
  }

  /** `where`: "browser" (practice: it does not count) or "server" (the check that counts). */
  start(text = "Checking…", where = null) {
    this.clear();
    this.container.hidden = false;
    this.summary.textContent = text;
    this.container.dataset.where = where || "";
    if (where === "browser") {
      this.where.textContent = "Practice check, in your browser: it does not count (anyone can change what it says here). The check that counts runs on the server.";
      this.where.classList.add("check-practice");
    } else if (where === "server") {
      this.where.textContent = "Checked on the server.";
    }
    if (this.live) this.live.textContent = text;
  }

  add(check) {
    const li = document.createElement("li");
    li.className = `check ${check.passed ? "check-pass" : "check-fail"}`;
    const mark = document.createElement("span");
    mark.className = "check-mark";
    mark.setAttribute("aria-hidden", "true");
    mark.textContent = check.passed ? "✓" : "✗";
    const label = document.createElement("span");
    label.className = "check-name";
    const said = document.createElement("span");
    said.className = "sr visually-hidden";
    said.textContent = check.passed ? "Passed: " : "Failed: ";
    label.append(said, check.name + (check.hidden && !check.name.startsWith("hidden") ? " (hidden)" : ""));
    li.append(mark, label);
    if (check.message && !(check.passed && /^(Test passed|Output matches|Hidden check passed)\.$/.test(check.message))) {
      const pre = document.createElement("pre");
      pre.className = "check-message";
      pre.textContent = check.message;
      li.append(pre);
    }
    this.list.append(li);
  }

  end(report, { focus = true } = {}) {
    this.container.hidden = false;
    this.summary.textContent = report.summary;
    this.summary.className = `check-summary ${report.passed ? "check-pass" : "check-fail"}`;
    if (this.live) this.live.textContent = `Check finished: ${report.summary}`;
    if (focus) this.summary.focus();
  }

  error(text) {
    this.container.hidden = false;
    this.summary.textContent = text;
    this.summary.className = "check-summary check-fail";
    if (this.live) this.live.textContent = text;
  }
}

export const CHECK_STYLE = `
.checks { padding: .4rem .8rem; border-top: 1px solid #eee; font: 14px/1.45 system-ui, sans-serif; }
.checks[hidden] { display: none; }
.check-summary { font-weight: 600; margin: .2rem 0 .4rem; }
.check-summary.check-pass { color: #1a7f37; } .check-summary.check-fail { color: #b42318; }
.check-where { margin: 0 0 .4rem; color: #5b5b63; font-size: .85rem; }
.check-where:empty { display: none; }
.check-where.check-practice { color: #6b4e00; background: #fff8e6; padding: .2rem .4rem; border-radius: .3rem; }
.check-list { list-style: none; margin: 0; padding: 0; }
.check { padding: .2rem 0; border-bottom: 1px solid #f0f0f2; }
.check-mark { display: inline-block; width: 1.3rem; font-weight: 700; }
.check-pass .check-mark { color: #1a7f37; } .check-fail .check-mark { color: #b42318; }
.check-message { margin: .2rem 0 .2rem 1.3rem; white-space: pre-wrap; font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: #fbfbfa; padding: .3rem .5rem; }
.instructions { padding: .4rem .8rem; border-bottom: 1px solid #eee; font: 14px/1.5 system-ui, sans-serif; }
.instructions pre { background: #f5f5f7; padding: .4rem .6rem; }
.sr, .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

/**
 * Put an exercise around an editor: instructions before it, a Check button in `bar` (after
 * `runButton`), the results after `resultsAfter`. `tier()` is the page's tier ("browser",
 * "server" or "auto"); checks run on the server for tier "server", for an exercise the browser
 * may not check (its checks never leave the server), and for "auto" when `runner` decides on
 * the server; otherwise in the browser, as practice. Returns {ready: Promise<exercise>,
 * check(): Promise<report>, where(): "browser" | "server"}.
 */
export function mountExercise({ ref, base, runner, bar, runButton, instructionsBefore, resultsAfter, live,
  getCode, setCode, tier, onBusy = () => {} }) {
  const doc = bar.ownerDocument;
  const headers = () => (runner.apiKey ? { authorization: `Bearer ${runner.apiKey}` } : {});
  const checkButton = doc.createElement("button");
  checkButton.type = "button";
  checkButton.className = "check-button";
  checkButton.textContent = "Check";
  checkButton.title = "Check your code against the exercise (Ctrl+Shift+Enter)";
  checkButton.setAttribute("aria-keyshortcuts", "Control+Shift+Enter");
  checkButton.disabled = true;
  runButton.after(checkButton);
  const instructions = doc.createElement("div");
  instructions.className = "instructions";
  instructions.setAttribute("role", "region");
  instructions.setAttribute("aria-label", "Exercise");
  instructions.hidden = true;
  instructionsBefore.before(instructions);
  const results = doc.createElement("div");
  resultsAfter.after(results);
  const view = new CheckView(results, { live });
  let exercise = null;
  let bundle = null;
  let busy = null;

  const ready = (async () => {
    try {
      exercise = await loadExercise(ref, { base, headers: headers() });
      if (exercise.source === "bundle") bundle = exercise;
      const title = doc.createElement("h2");
      title.className = "exercise-title";
      title.textContent = exercise.title || exercise.id;
      const body = doc.createElement("div");
      renderMarkdown(body, withoutTitle(exercise.instructions, exercise.title));
      instructions.append(title, body);
      instructions.hidden = false;
      if (exercise.starter && !getCode().trim()) setCode(exercise.starter);
      checkButton.disabled = false;
      checkButton.setAttribute("aria-label", `Check your code: ${exercise.title || exercise.id}`);
    } catch (error) {
      view.error(error.refused ? `This exercise could not be loaded. ${error.message}` : String(error.message || error));
    }
    return exercise;
  })();

  /** Where the next Check runs. */
  function where() {
    if (!exercise) return null;
    if (exercise.source === "bundle") return "browser";
    if (!exercise.browser) return "server"; // a server-only exercise, whatever the page's tier
    const wanted = tier();
    if (wanted === "auto") return runner.resolveTier("auto");
    return wanted === "server" ? "server" : "browser";
  }

  async function check() {
    if (busy || !exercise) return null;
    const abort = new AbortController();
    busy = abort;
    checkButton.disabled = true;
    onBusy(true, abort);
    const place = where();
    view.start("Checking…", place);
    let report = null;
    try {
      if (place === "server") {
        report = await checkOnServer(base, exercise.id, getCode(), { signal: abort.signal, headers: headers() });
        for (const c of report.checks) view.add(c);
      } else {
        if (!bundle) bundle = await loadBundle(exercise.id, { base, headers: headers() });
        report = await checkInBrowser(runner, bundle, getCode(), { signal: abort.signal, onCheck: (c) => view.add(c) });
      }
      report.where = place;
      view.end(report);
    } catch (error) {
      view.error(abort.signal.aborted ? "The check was stopped." : String(error.message || error));
    } finally {
      busy = null;
      checkButton.disabled = false;
      onBusy(false, abort);
    }
    return report;
  }

  checkButton.addEventListener("click", () => check());
  bar.getRootNode().addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.shiftKey && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      event.stopPropagation();
      check();
    }
  }, true);
  return { ready, check, where, view, button: checkButton, stop: () => busy && busy.abort(), get exercise() { return exercise; } };
}
