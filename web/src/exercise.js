// Exercises in the page: load one, check the student's code on the server or, as practice, in
// the browser, and show the result as one row per check. The checking logic is Python, written
// once: in the browser the page runs the practice program (wasm_runner/exercises/practice.py
// with judging.py, the server's judging, generated into checking.js) in Pyodide to plan the
// runs and to judge each one. In the browser every check, hidden ones too, is on the student's
// machine, and the judging shares the worker with the student's runs: a student can read the
// checks and make this page say anything. It is labelled practice; the check that counts runs
// on the server (tier="server"), where hidden checks never leave the server.
import { fetchServerJson } from "./client.js";
import { HARNESS_PROGRAM, PRACTICE_PROGRAM } from "./checking.js";
import { checkedExplanation, renderExplanation } from "./explain.js";

export const CHECK_MIME = "application/vnd.wasm-runner.check+json";
const LANG_TAG = /^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$/; // the HTTP API's lang (explanations.LANG_PATTERN)

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

/** One request to the practice program (practice.py) in the page's Pyodide: its JSON answer. */
async function practice(runner, request) {
  const res = await runner.run(PRACTICE_PROGRAM, { tier: "browser", stdin: JSON.stringify(request) });
  if (res.status === "ok") {
    try {
      return JSON.parse(res.stdout);
    } catch {
      // said below
    }
  }
  const why = (res.stderr || "").trim().split("\n").pop() || res.message || res.status;
  throw new Error(`the browser could not check the code: ${why}`);
}

/** The part of a run's result the judging reads (the harness's report is a CHECK_MIME output). */
function forJudging(res) {
  return {
    status: res.status, limit: res.limit ?? null, message: res.message || "", stdout: res.stdout || "", stderr: res.stderr || "",
    outputs: (res.outputs || []).filter((o) => o && o.mime === CHECK_MIME),
  };
}

/**
 * Check `code` in the browser, as practice: the practice program plans the runs, each runs
 * through `runner` (client.js, tier "browser"; a Node controller in tests), and the practice
 * program judges it, as the server would. Resolves with the report (the server's shape). A
 * failed check's explanation (a function the tests call is missing) is rendered in `lang`, as
 * the server renders it (English when the catalogues lack `lang`).
 */
export async function checkInBrowser(runner, bundle, code, { signal, onCheck, filename, lang = null } = {}) {
  const { runs, limits, report: empty } = await practice(runner, { op: "plan", bundle, code });
  const checks = [];
  let report = empty;
  for (const run of runs) {
    let res;
    if (signal && signal.aborted) {
      res = { status: "cancelled", message: "The check was stopped.", outputs: [], limit: null };
    } else {
      const options = { tier: "browser", stdin: run.stdin, limits, signal };
      if (run.program === "student") options.filename = filename || run.filename; // the harness names its own
      res = await runner.run(run.program === "student" ? code : HARNESS_PROGRAM + run.suffix, options);
    }
    const answer = await practice(runner, { op: "judge", exercise: bundle.id, run, result: forJudging(res), checks });
    if (answer.check.explanation) {
      const raw = checkedExplanation(answer.check.explanation);
      if (raw) answer.check.explanation = renderExplanation(raw, lang);
      else delete answer.check.explanation;
    }
    checks.push(answer.check);
    report = { ...answer.report, checks: [...checks] }; // with the explanations rendered here
    if (onCheck) onCheck(answer.check);
  }
  return report;
}

/**
 * Check `code` on the server (hidden checks stay there): POST /api/exercises/{id}/check, saying
 * how many hints the page has shown (`hintsUsed`: the page's count; the server bounds it and
 * keeps the highest per user, and answers its count as `hints_used`) and the language of a
 * check's explanation (`lang`, as the page's runs ask for theirs).
 */
export async function checkOnServer(base, id, code, { signal, headers = {}, hintsUsed = 0, lang = null } = {}) {
  const asked = { code, hints_used: hintsUsed };
  if (typeof lang === "string" && LANG_TAG.test(lang)) asked.lang = lang; // a check's explanation
  const { response, body } = await fetchServerJson(base, new URL(`api/exercises/${encodeURIComponent(id)}/check`, base), {
    method: "POST", signal, headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(asked),
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
    if (check.message && !check.passed) { // a passing check's message only says it passed
      const pre = document.createElement("pre");
      pre.className = "check-message";
      pre.textContent = check.message;
      li.append(pre);
    }
    const e = check.explanation;
    if (e && !check.passed && typeof e.title === "string") { // e.g. a function the tests call is missing
      const box = document.createElement("div");
      box.className = "check-explain";
      if (typeof e.lang === "string") box.lang = e.lang;
      const title = document.createElement("strong");
      title.textContent = e.title;
      box.append(title);
      for (const [part, text] of [["text", e.text], ["hint", e.hint]]) {
        if (typeof text !== "string" || !text) continue;
        const p = document.createElement("p");
        p.className = `check-explain-${part}`;
        p.textContent = text;
        box.append(p);
      }
      li.append(box);
    }
    this.list.append(li);
  }

  end(report, { focus = true } = {}) {
    this.container.hidden = false;
    this.summary.textContent = report.summary;
    this.summary.className = `check-summary ${report.passed ? "check-pass" : "check-fail"}`;
    const notes = Array.isArray(report.style_notes) ? report.style_notes : [];
    if (notes.length) this.styleNotes(notes);
    if (this.live) this.live.textContent = `Check finished: ${report.summary}` + (notes.length ? ` ${notes.length} style ${notes.length === 1 ? "note" : "notes"} below.` : "");
    if (focus) this.summary.focus();
  }

  /** The exercise's style notes (`style = true`: the lint's style rules), beside the checks. */
  styleNotes(notes) {
    const heading = document.createElement("p");
    heading.className = "style-notes-title";
    heading.textContent = "Style notes (they do not change the result)";
    const list = document.createElement("ul");
    list.className = "style-notes";
    for (const note of notes) {
      const li = document.createElement("li");
      li.textContent = `Line ${note.line}: ${note.title}. ${note.message}`;
      list.append(li);
    }
    this.container.append(heading, list);
  }

  error(text) {
    this.container.hidden = false;
    this.summary.textContent = text;
    this.summary.className = "check-summary check-fail";
    if (this.live) this.live.textContent = text.split(/(?<=\.) /)[0]; // the first sentence; the rest is above
  }
}

export const CHECK_STYLE = `
.checks { padding: .4rem .8rem; border-top: 1px solid #eee; font: 14px/1.45 system-ui, sans-serif; }
.checks[hidden] { display: none; }
.check-summary { font-weight: 600; margin: .2rem 0 .4rem; }
.check-summary.check-pass { color: #1a7f37; } .check-summary.check-fail { color: #b42318; }
.style-notes-title { font-weight: 600; margin: .6rem 0 .2rem; } .style-notes { margin: 0; padding-left: 1.2rem; }
.check-where { margin: 0 0 .4rem; color: #5b5b63; font-size: .85rem; }
.check-where:empty { display: none; }
.check-where.check-practice { color: #6b4e00; background: #fff8e6; padding: .2rem .4rem; border-radius: .3rem; }
.check-list { list-style: none; margin: 0; padding: 0; }
.check { padding: .2rem 0; border-bottom: 1px solid #f0f0f2; }
.check-mark { display: inline-block; width: 1.3rem; font-weight: 700; }
.check-pass .check-mark { color: #1a7f37; } .check-fail .check-mark { color: #b42318; }
.check-explain { margin: .2rem 0 .2rem 1.3rem; padding: .3rem .5rem; border-left: 4px solid #b42318; background: #fff6e5; color: #222; }
.check-explain p { margin: .2rem 0 0; }
.check-explain-hint::before { content: "→ "; }
.check-message { margin: .2rem 0 .2rem 1.3rem; white-space: pre-wrap; font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: #fbfbfa; padding: .3rem .5rem; }
.instructions { padding: .4rem .8rem; border-bottom: 1px solid #eee; font: 14px/1.5 system-ui, sans-serif; }
.instructions pre { background: #f5f5f7; padding: .4rem .6rem; }
.hints { margin: .4rem 0 .2rem; }
.hint-list { margin: 0 0 .3rem; padding-left: 1.4rem; }
.hint-list:empty { display: none; }
.hint { background: #f3f7ff; border-left: 3px solid #3b6fd8; padding: .2rem .5rem; margin: .2rem 0; }
.hint p { margin: 0; }
.sr, .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

/**
 * Put an exercise around an editor: instructions before it, a Check button in `bar` (after
 * `runButton`), the results after `resultsAfter`. `tier()` is the page's tier ("browser",
 * "server" or "auto"); checks run on the server for tier "server", for an exercise the browser
 * may not check (its checks never leave the server), and for "auto" when `runner` decides on
 * the server; otherwise in the browser, as practice. `lang()` is the language of a check's
 * explanation (the page's, or an embed's own). Returns {ready: Promise<exercise>,
 * check(): Promise<report>, where(): "browser" | "server"}.
 */
export function mountExercise({ ref, base, runner, bar, runButton, instructionsBefore, resultsAfter, live,
  getCode, setCode, tier, lang = () => null, onBusy = () => {} }) {
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
  const hints = mountHints(doc, () => exercise, base);

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
      hints.show(instructions);
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
        report = await checkOnServer(base, exercise.id, getCode(), { signal: abort.signal, headers: headers(),
          hintsUsed: hints.used(), lang: lang() });
        for (const c of report.checks) view.add(c);
      } else {
        if (!bundle) bundle = await loadBundle(exercise.id, { base, headers: headers() });
        report = await checkInBrowser(runner, bundle, getCode(), { signal: abort.signal, onCheck: (c) => view.add(c),
          lang: lang() });
        report.hints_used = hints.used(); // the page's own count: practice never counts
      }
      report.where = place;
      view.end(report);
      hints.said(view.where, report);
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
  return { ready, check, where, view, button: checkButton, stop: () => busy && busy.abort(), get exercise() { return exercise; },
    showHint: () => hints.reveal(), hintsUsed: () => hints.used() };
}

/**
 * An exercise's hints (`hints = [...]` in it), revealed one at a time by the student's "Show a
 * hint" button, read out as they appear; how many were shown is kept in the browser's storage
 * for this exercise (a reloaded page shows them again) and sent with each server Check.
 */
function mountHints(doc, exercise, base) {
  const box = doc.createElement("div");
  box.className = "hints";
  const list = doc.createElement("ol");
  list.className = "hint-list";
  list.setAttribute("aria-live", "polite");
  list.setAttribute("aria-label", "Hints");
  const button = doc.createElement("button");
  button.type = "button";
  button.className = "hint-button";
  box.append(list, button);
  let used = 0;
  const all = () => (exercise() && Array.isArray(exercise().hints) ? exercise().hints : []);
  const storeKey = () => `wasm-runner:hints:${base}:${exercise().id}`;
  const label = () => {
    const n = all().length;
    button.disabled = used >= n;
    button.textContent = used >= n ? (n === 1 ? "The hint is shown" : `All ${n} hints shown`)
      : used ? `Show another hint (${used + 1} of ${n})` : `Show a hint (1 of ${n})`;
  };
  const reveal = () => {
    const n = all().length;
    if (used >= n) return used;
    const item = doc.createElement("li");
    item.className = "hint";
    renderMarkdown(item, all()[used]);
    list.append(item);
    used += 1;
    try { localStorage.setItem(storeKey(), String(used)); } catch { /* storage off: the count lives in the page */ }
    label();
    return used;
  };
  button.addEventListener("click", () => reveal());
  return {
    used: () => used,
    reveal,
    show(container) {
      if (!all().length) return;
      container.append(box);
      let kept = 0;
      try { kept = Number.parseInt(localStorage.getItem(storeKey()) || "0", 10) || 0; } catch { kept = 0; }
      for (let i = 0; i < Math.min(kept, all().length); i++) reveal();
      label();
    },
    /** After a Check: the hints used, beside where it ran. */
    said(where, report) {
      const n = all().length;
      if (!n) return;
      const count = typeof report.hints_used === "number" ? report.hints_used : used;
      const text = `Hints used: ${count} of ${n}.`;
      where.textContent = where.textContent ? `${where.textContent} ${text}` : text;
    },
  };
}
