// The one client both the playground and the embed element use: `run(code, {tier})` in the
// browser (Pyodide in a worker inside an opaque-origin frame) or on the server (POST /api/run),
// with the same result shape either way.
import { answerCall, checkFunctions, exposeInto } from "./hostcalls.js";
import { STATUS, emptyResult, isMessage, isPackageNames, message } from "./protocol.js";

const TIERS = ["browser", "server", "auto"];
const REFUSED = new WeakSet(); // results made here because the server did not run the program
const STARTED = new WeakSet(); // server results of runs that started there

/** A run's `display` option, the same for both tiers: "figures" unless true or false is asked. */
const displayOf = (options) => (options.display === true || options.display === false ? options.display : "figures");

/**
 * A runner bound to one wasm-runner server (the asset origin).
 * @param {object} [options]
 * @param {string} [options.base]  the server's base URL; defaults to where this module came from
 * @param {string} [options.tier]  "browser" | "server" | "auto" (default "auto")
 */
// Pyodide's large files (and the snapshot), fetched once per page for every runner's frame.
const relayCache = new Map(); // url -> Promise<ArrayBuffer | null>

function fetchForFrame(url) {
  if (!relayCache.has(url)) {
    relayCache.set(url, fetch(url).then((response) => (response.ok ? response.arrayBuffer() : null)).catch(() => null));
  }
  return relayCache.get(url);
}

export class Runner {
  /**
   * `relay`: URLs of Pyodide's large files (the server lists them in the page or embed.js); they
   * are fetched as soon as the frame is wanted, while the frame and its worker start.
   * `sandbox`: the frame's path under `base` ("sandbox?snapshot=off" starts Python normally).
   * `user` / `userToken`: who the server-tier runs are for inside the key (an opaque id, or a
   * token the platform signed for this user): each user gets its share of the key's caps.
   */
  constructor({ base, tier = "auto", apiKey = null, relay = [], sandbox = "sandbox", user = null, userToken = null } = {}) {
    this.base = new URL(base || new URL("../../", import.meta.url).href);
    this.relay = Array.isArray(relay) ? relay.filter((url) => typeof url === "string") : [];
    this.sandboxPath = typeof sandbox === "string" && /^sandbox(\?[\w=&]*)?$/.test(sandbox) ? sandbox : "sandbox";
    this.notice = ""; // what the frame said while loading (e.g. that the snapshot was not used)
    this.onNotice = null;
    this.tier = TIERS.includes(tier) ? tier : "auto";
    this.apiKey = apiKey; // only for servers that require keys for the server tier
    this.user = typeof user === "string" && user ? user : null;
    this.userToken = typeof userToken === "string" && userToken ? userToken : null;
    this.frame = null;
    this.frameReady = null;
    this.browserInfo = null; // set when Pyodide is ready in the frame
    this.nextId = 1;
    this.runs = new Map();
    this.onMessage = (event) => this.fromFrame(event);
    this.onReady = null; // called with the runtime's info once Pyodide is ready
    this.exposed = new Map(); // the page's functions browser-tier programs may call (expose)
  }

  /**
   * Give browser-tier programs functions of this page: `expose({sensor: async (...args) => …})`,
   * then in Python `from host import sensor`. Arguments and results cross as plain data (see
   * hostcalls.js); a name given again replaces the function, `null` removes it. Returns this.
   */
  expose(functions) {
    exposeInto(this.exposed, functions);
    return this;
  }

  /** Stop every browser run in progress (server runs stop through their signal). */
  stop() {
    for (const id of this.runs.keys()) this.post(message("stop", { id }));
  }

  /** Load the sandbox frame and start Pyodide now, so the first run does not wait. */
  prefetch() {
    return this.ensureFrame().then(() => this.post(message("prefetch")));
  }

  ensureFrame() {
    if (this.frameReady) return this.frameReady;
    const frame = document.createElement("iframe");
    // No allow-same-origin: the frame's origin is opaque, so code there cannot read this page's
    // cookies, storage or DOM. The server also sends `sandbox allow-scripts` in the frame's CSP.
    frame.setAttribute("sandbox", "allow-scripts");
    frame.setAttribute("allow", "cross-origin-isolated");
    frame.setAttribute("title", "Python sandbox");
    frame.setAttribute("aria-hidden", "true");
    frame.tabIndex = -1;
    frame.style.cssText = "position:absolute;width:1px;height:1px;border:0;opacity:0;pointer-events:none;left:-10px;top:-10px";
    frame.src = new URL(this.sandboxPath, this.base).href;
    for (const url of this.relay) if (this.mayRelay(url)) fetchForFrame(url); // start now, in parallel with the frame
    this.frame = frame;
    window.addEventListener("message", this.onMessage);
    this.frameReady = new Promise((resolve) => { this.resolveFrame = resolve; });
    document.body.appendChild(frame);
    return this.frameReady;
  }

  /** Only files under this runner's /pyodide/ are fetched for the frame. */
  mayRelay(url) {
    return typeof url === "string" && url.startsWith(new URL("pyodide/", this.base).href);
  }

  /**
   * Hand Pyodide's large files to the frame: its opaque origin gets no HTTP cache, this page
   * does. A file that failed to fetch is left out (the frame fetches it itself). The bytes are
   * copied, not transferred, so a second runner on the page reuses them.
   */
  async relayAssets(urls) {
    const files = {};
    await Promise.all(urls.filter((url) => this.mayRelay(url)).map(async (url) => {
      const body = await fetchForFrame(url);
      if (body) files[url] = body.slice(0); // a copy to transfer; the cache keeps the original
    }));
    this.frame.contentWindow.postMessage(message("assets", { files }), "*", Object.values(files));
  }

  post(msg) {
    this.frame.contentWindow.postMessage(msg, "*");
  }

  fromFrame(event) {
    // Accept only messages from our own frame, of a known shape, for a run we started.
    if (!this.frame || event.source !== this.frame.contentWindow) return;
    const msg = event.data;
    if (!isMessage(msg)) return;
    if (msg.type === "frame-ready") {
      this.frameIsolated = msg.isolated;
      this.relayAssets(msg.relay);
      this.resolveFrame();
      return;
    }
    if (msg.type === "status" && msg.id === undefined) {
      this.notice = msg.text; // said while Python loads, e.g. that it started without the snapshot
      console.warn(`wasm-runner: ${msg.text}`);
      if (typeof this.onNotice === "function") this.onNotice(msg.text);
      return;
    }
    if (msg.type === "ready") {
      this.browserInfo = msg.info;
      if (typeof this.onReady === "function") this.onReady(msg.info);
      return;
    }
    const run = this.runs.get(msg.id);
    if (!run) return;
    if (msg.type === "stream") for (const chunk of msg.chunks) run.emit("output", { stream: chunk.stream, text: chunk.text });
    else if (msg.type === "output") run.emit("rich", msg.output);
    else if (msg.type === "status") run.emit("status", { text: msg.text });
    else if (msg.type === "input-request") run.ask(msg.prompt);
    else if (msg.type === "host-call") run.hostCall(msg.call, msg.request);
    else if (msg.type === "done") run.finish(sanitizeResult(msg.result));
  }

  /**
   * Where "auto" runs: decided once, at the first run, for the rest of this runner's life (one
   * page session): the browser if Pyodide is ready by then, else the server. It never changes
   * afterwards, so the same code never meets another Python or package set on the next Run
   * (except when the server refuses the very first run: then the browser, for good).
   */
  resolveTier(tier) {
    const wanted = TIERS.includes(tier) ? tier : this.tier;
    if (wanted !== "auto") return wanted;
    if (!this.autoTier) this.autoTier = this.browserInfo ? "browser" : "server";
    return this.autoTier;
  }

  /**
   * Run `code`. Options: tier, stdin, limits, onOutput({stream, text}), onRich(output),
   * onInput(prompt) -> Promise<string|null> (enables interactive input()), onStatus, signal,
   * functions ({name: function}: this page's functions the program may call in the browser
   * tier, besides those of `expose`), display (true: figures and the last expression's value, as
   * a notebook cell's; "figures", the default: figures only; false: only those plt.show() shows;
   * the same on both tiers). Resolves with the result object; `result.tier` says where it ran.
   */
  run(code, options = {}) {
    const tier = this.resolveTier(options.tier);
    const auto = (TIERS.includes(options.tier) ? options.tier : this.tier) === "auto";
    if (tier === "browser") {
      return this.runInBrowser(code, options).then((result) => {
        // "auto" runs where the program's packages are: those the browser's index does not list
        // (the program was not run) are asked of the server for this run
        if (auto && Array.isArray(result.refused_packages) && result.refused_packages.length) {
          return this.runOnServer(code, options).then((r) => (REFUSED.has(r) ? { ...result, tier } : { ...r, tier: "server" }));
        }
        return { ...result, tier };
      });
    }
    return this.runOnServer(code, options).then((result) => {
      // "auto" falls back to the browser when the server refuses (keys required, busy, away)
      if (auto && REFUSED.has(result) && !this.autoServerWorked) {
        this.autoTier = "browser";
        return this.runInBrowser(code, options).then((r) => ({ ...r, tier: "browser" }));
      }
      if (auto && !REFUSED.has(result)) this.autoServerWorked = true;
      return { ...result, tier };
    });
  }

  async runInBrowser(code, options) {
    // the functions this run may call: the runner's, and those given for this run (checked now:
    // a run sees the set as it was when it started)
    const exposed = new Map([...this.exposed, ...checkFunctions(options.functions)]);
    const [network] = await Promise.all([this.networkFor(), this.ensureFrame()]);
    const id = this.nextId++;
    const handlers = {
      output: options.onOutput || (() => {}),
      rich: options.onRich || (() => {}),
      status: options.onStatus || (() => {}),
    };
    return new Promise((resolve) => {
      const run = {
        emit: (kind, payload) => { try { handlers[kind](payload); } catch (e) { console.error(e); } },
        ask: async (prompt) => {
          let text = null;
          try {
            text = options.onInput ? await options.onInput(prompt) : null;
          } catch {
            text = null;
          }
          if (this.runs.has(id)) this.post(message("input", { id, text: text === undefined ? null : text }));
        },
        hostCall: async (call, request) => {
          const answer = await answerCall(exposed, request);
          if (this.runs.has(id)) this.post(message("host-answer", { id, call, answer }));
        },
        finish: (result) => {
          this.runs.delete(id);
          if (options.signal) options.signal.removeEventListener("abort", onAbort);
          resolve(result);
        },
      };
      const onAbort = () => this.post(message("stop", { id }));
      if (options.signal) {
        if (options.signal.aborted) queueMicrotask(onAbort);
        options.signal.addEventListener("abort", onAbort);
      }
      this.runs.set(id, run);
      this.currentBrowserRun = id;
      this.post(message("run", {
        id,
        code,
        stdin: options.stdin ?? null,
        limits: options.limits ?? null,
        interactive: typeof options.onInput === "function",
        filename: typeof options.filename === "string" ? options.filename : null,
        functions: [...exposed.keys()],
        display: displayOf(options),
        lang: typeof options.lang === "string" ? options.lang : null,
        packages: packagesOf(options),
        network,
      }));
    });
  }

  /**
   * The network of one browser-tier run (docs/security.md, "Network"): the runner's grant
   * (POST /api/network/runs with this page's key and user; the key stays here, the frame gets a
   * token for that run only), or the runner's sentence when no rule names the key, which every
   * request of the run raises. A refusal is remembered while the key and user stay the same (the
   * rules are the server's config), and so is a runner that cannot be asked; a busy one is asked
   * again.
   */
  async networkFor() {
    const who = JSON.stringify([this.apiKey, this.user, this.userToken]); // a refusal is for these
    if (this.networkOff && this.networkOff.who === who) return this.networkOff.off;
    this.networkOff = null;
    let response = null;
    let answer = null;
    try {
      response = await fetch(new URL("api/network/runs", this.base), {
        method: "POST", headers: this.headers(), body: "{}", credentials: "omit",
      });
      answer = await response.json().catch(() => null);
    } catch (error) {
      // unreachable, or another origin the runner's CORS list does not name: not asked again
      const off = { on: false, refusal: `network access is off for this run: the runner could not be asked for it (${error && error.name ? error.name : error})` };
      this.networkOff = { who, off };
      return off;
    }
    if (response.ok && answer && answer.on === true && typeof answer.token === "string") {
      return { on: true, token: answer.token, url: new URL("api/network/fetch", this.base).href };
    }
    const said = answer && typeof answer.refusal === "string" ? answer.refusal
      : `network access is off for this run: the runner did not grant it (${answer && answer.error && answer.error.message ? answer.error.message : `HTTP ${response.status}`})`;
    const off = { on: false, refusal: said };
    if (response.status !== 429 && response.status < 500) this.networkOff = { who, off };
    return off;
  }

  /** The server tier: WebSocket when the caller answers input(), else Server-Sent Events. */
  async runOnServer(code, options) {
    const body = { code };
    if (options.stdin !== undefined && options.stdin !== null) body.stdin = options.stdin;
    if (options.limits) body.limits = options.limits;
    // by default figures from plt.show() and those left open, without echoing the last expression
    body.display = displayOf(options);
    // the explanation under an error, in the page's language (docs/explanations.md)
    if (typeof options.lang === "string" && /^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$/.test(options.lang)) body.lang = options.lang;
    if (packagesOf(options).length) body.packages = packagesOf(options);
    if (typeof options.filename === "string" && this.serverTakesFilename !== false) body.filename = options.filename;
    const interactive = typeof options.onInput === "function" && typeof WebSocket === "function";
    const result = interactive ? await this.runOnServerSocket(body, options) : await this.runOnServerStream(body, options);
    if (body.filename && result.status === STATUS.INVALID_INPUT && /filename/.test(result.message) && !STARTED.has(result)) {
      // a server that does not take a file name yet: run the program without it
      this.serverTakesFilename = false;
      return this.runOnServer(code, options);
    }
    return result;
  }

  headers() {
    const headers = { "content-type": "application/json" };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (this.userToken) headers["x-wasm-runner-user-token"] = this.userToken;
    else if (this.user) headers["x-wasm-runner-user"] = this.user;
    return headers;
  }

  /**
   * A refused server run whose cause the page's author can fix (`why`: "origin", or read from
   * the server's 401/403) gets `result.refused` {reason, text}: said for the author, on the page
   * and once in the console, instead of as a fault of the server.
   */
  explain(result, why = null) {
    const said = authorRefusal(why || result.answered, this.base, result.message);
    delete result.answered;
    if (said) {
      result.refused = said;
      result.message = said.text;
      tellAuthor(said);
    }
    return result;
  }

  async runOnServerStream(body, options) {
    const started = performance.now();
    const controller = new AbortController();
    const abort = () => controller.abort();
    if (options.signal) options.signal.addEventListener("abort", abort);
    const emit = (stream, text) => { if (options.onOutput && text) options.onOutput({ stream, text }); };
    let info = null;
    try {
      const response = await fetch(new URL("api/run/stream", this.base), {
        method: "POST", headers: this.headers(), body: JSON.stringify(body), signal: controller.signal,
      });
      if (!response.ok || !response.body) return this.explain(refusal(response, await readJson(response)));
      let result = null;
      for await (const event of serverSentEvents(response.body)) {
        let data = null;
        try { data = JSON.parse(event.data); } catch { continue; }
        if (event.event === "stdout" || event.event === "stderr") emit(event.event, data.data);
        else if (event.event === "output" && Array.isArray(data.chunks)) {
          for (const chunk of data.chunks) if (Array.isArray(chunk)) emit(chunk[0] === "stderr" ? "stderr" : "stdout", String(chunk[1] ?? ""));
        } else if (event.event === "start") info = data;
        else if (event.event === "result") result = sanitizeResult(data);
        else if (event.event === "error") {
          return { ...emptyResult("server"), status: STATUS.INTERNAL_ERROR, exit_code: null, message: (data.error && data.error.message) || "the server failed" };
        }
      }
      if (!result) throw new Error("the stream ended without a result");
      for (const output of result.outputs) if (options.onRich) options.onRich(output);
      return withStartInfo(result, info, 0);
    } catch (error) {
      const cancelled = controller.signal.aborted;
      const result = {
        ...emptyResult("server"),
        status: cancelled ? STATUS.CANCELLED : STATUS.INTERNAL_ERROR,
        exit_code: null,
        wall_ms: performance.now() - started,
        message: cancelled ? "The run was stopped." : `Could not reach the server: ${error.message}`,
      };
      if (!cancelled && !info) {
        REFUSED.add(result);
        this.explain(result, await unreadableWhy(this.base));
      }
      return withStartInfo(result, info, 0);
    } finally {
      if (options.signal) options.signal.removeEventListener("abort", abort);
    }
  }

  runOnServerSocket(body, options) {
    const url = new URL("api/run/ws", this.base);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    if (this.apiKey) url.searchParams.set("api_key", this.apiKey);
    return new Promise((resolve) => {
      const socket = new WebSocket(url);
      const opened = performance.now();
      let settled = false;
      let stopped = false;
      let lastPrompt = "";
      let info = null;
      let waitMs = 0; // time the program spent waiting for an answer (measured here)
      const finish = (result) => {
        if (settled) return;
        settled = true;
        if (options.signal) options.signal.removeEventListener("abort", onAbort);
        try { socket.close(); } catch { /* closed */ }
        resolve(withStartInfo(result, info, waitMs));
      };
      let socketOpened = false;
      let failing = false;
      const failed = async (message, status = STATUS.INTERNAL_ERROR, answered = null) => {
        if (settled || failing) return;
        failing = true;
        const result = { ...emptyResult("server"), status, exit_code: null, message, wall_ms: performance.now() - opened };
        if (!info && !stopped && status !== STATUS.INVALID_INPUT) { // the program never started there
          REFUSED.add(result);
          // a handshake the server closed (origin not allowed) looks like a network fault here
          this.explain(result, answered || (socketOpened ? null : await unreadableWhy(this.base)));
        }
        finish(result);
      };
      const onAbort = () => {
        stopped = true;
        try { socket.send(JSON.stringify({ type: "cancel" })); } catch { /* closed */ }
        setTimeout(() => failed("The run was stopped.", STATUS.CANCELLED), 2000);
      };
      if (options.signal) options.signal.addEventListener("abort", onAbort);
      const who = this.userToken ? { user_token: this.userToken } : this.user ? { user: this.user } : {};
      socket.onopen = () => {
        socketOpened = true;
        socket.send(JSON.stringify({ type: "run", ...body, ...who }));
      };
      socket.onerror = () => failed("Could not reach the server.");
      socket.onclose = () => failed(stopped ? "The run was stopped." : "The server closed the connection.", stopped ? STATUS.CANCELLED : STATUS.INTERNAL_ERROR);
      const emit = (stream, text) => {
        lastPrompt = (lastPrompt + text).split("\n").pop();
        if (options.onOutput && text) options.onOutput({ stream, text });
      };
      socket.onmessage = async (event) => {
        let msg = null;
        try { msg = JSON.parse(event.data); } catch { return; }
        if (msg.type === "stdout" || msg.type === "stderr") {
          emit(msg.type, String(msg.data ?? ""));
        } else if (msg.type === "output" && Array.isArray(msg.chunks)) {
          for (const chunk of msg.chunks) if (Array.isArray(chunk)) emit(chunk[0] === "stderr" ? "stderr" : "stdout", String(chunk[1] ?? ""));
        } else if (msg.type === "input_wanted") {
          const asked = performance.now();
          const line = await options.onInput(lastPrompt);
          waitMs += performance.now() - asked;
          lastPrompt = "";
          if (settled) return; // the run ended meanwhile: a late answer goes nowhere
          if (line === null || line === undefined) socket.send(JSON.stringify({ type: "eof" }));
          else socket.send(JSON.stringify({ type: "stdin", data: `${line}\n` }));
        } else if (msg.type === "result") {
          const result = sanitizeResult(msg.result || {});
          for (const output of result.outputs) if (options.onRich) options.onRich(output);
          finish(result);
        } else if (msg.type === "start") {
          info = msg;
        } else if (msg.type === "error" && !info) {
          const error = msg.error || {};
          const invalid = /invalid|bad_/.test(String(error.code || ""));
          const answered = /^(unauthorized|forbidden|profile_forbidden)$/.test(String(error.code || "")) ? "key" : null;
          failed(error.message || msg.message || "The server refused the run.", invalid ? STATUS.INVALID_INPUT : STATUS.INTERNAL_ERROR, answered);
        }
      };
    });
  }
}


/** Add what the server's `start` event said (Python version, limits) and the input wait. */
function withStartInfo(result, info, waitMs) {
  if (info) {
    STARTED.add(result);
    if (!result.python && typeof info.python === "string") result.python = info.python;
    if (!result.limits && info.limits && typeof info.limits === "object") result.limits = info.limits;
  }
  if (!Number.isFinite(result.input_wait_ms)) result.input_wait_ms = waitMs;
  return result;
}

async function readJson(response) {
  try { return await response.json(); } catch { return null; }
}

function refusal(response, payload) {
  const error = payload && (payload.error || payload);
  const detail = error && (error.message || error.detail);
  const status = response.status === 400 || response.status === 422 || response.status === 413 ? STATUS.INVALID_INPUT : STATUS.INTERNAL_ERROR;
  const result = { ...emptyResult("server"), status, exit_code: null, message: `The server answered ${response.status}${detail ? `: ${detail}` : ""}` };
  if (status !== STATUS.INVALID_INPUT) REFUSED.add(result);
  if (response.status === 401 || response.status === 403) result.answered = "key";
  return result;
}

// -- refusals the page's author can fix ---------------------------------------------------------
/**
 * Why a request to the server at `base` got no answer this page could read: "origin" when the
 * server answers but the browser may not show this page its answers (this page's origin is not
 * in the server's cors_origins), "unreachable" when it does not answer at all, "" when it
 * answers now (a passing network fault). A same-origin page is never refused for its origin.
 */
export async function unreadableWhy(base) {
  const probe = new URL("healthz", base);
  const options = { cache: "no-store", credentials: "omit" };
  try {
    await fetch(probe, options);
    return "";
  } catch {
    if (probe.origin === location.origin) return "unreachable";
  }
  try {
    await fetch(probe, { ...options, mode: "no-cors" }); // an answer this page may not read
    return "origin";
  } catch {
    return "unreachable";
  }
}

/**
 * What to tell about a refusal the page's author can fix: {reason, sentence, text}, or null.
 * `why`: "origin" (see unreadableWhy) or "key" (the server answered 401/403: an API key is
 * missing, not valid, or may not do this); `said`: the server's own words.
 */
export function authorRefusal(why, base, said = "") {
  const runner = new URL(base).origin;
  const page = typeof location === "object" ? location.origin : "this page";
  const sentence = "Could not run it: this page is not set up to use the server";
  if (why === "origin") {
    return { reason: "origin", sentence, text: `For the page's author: the runner at ${runner} does not accept requests from this page's origin, ${page}. Add "${page}" to the server's cors_origins setting (or use tier="browser").` };
  }
  if (why === "key") {
    const words = String(said || "").replace(/^The server answered \d+: /, "");
    return { reason: "key", sentence, text: `For the page's author: the runner at ${runner} refused this page's request${words ? ` (${words})` : ""}. It needs an API key it accepts for this, or a server that allows anonymous use (auth = false).` };
  }
  return null;
}

const told = new Set();

/** The author reads the console: say each refusal there once per page. */
function tellAuthor(said) {
  if (told.has(said.text)) return;
  told.add(said.text);
  console.error(`wasm-runner: ${said.text}`);
}

/**
 * fetch() to the server for JSON: resolves with {response, body}; a request the server refused
 * in a way the page's author can fix throws an Error with `refused` set (see authorRefusal).
 */
export async function fetchServerJson(base, url, init = {}) {
  let response;
  try {
    response = await fetch(url, { credentials: "omit", ...init });
  } catch (error) {
    if (init.signal && init.signal.aborted) throw error;
    const said = authorRefusal(await unreadableWhy(base), base);
    throw refusedError(said, `could not reach the server: ${error.message}`);
  }
  const body = await readJson(response);
  if (response.status === 401 || response.status === 403) {
    const words = body && body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
    throw refusedError(authorRefusal("key", base, words), words);
  }
  return { response, body };
}

function refusedError(said, fallback) {
  const error = new Error(said ? said.text : fallback);
  if (said) {
    error.refused = said;
    tellAuthor(said);
  }
  return error;
}

/** Parse a text/event-stream body into {event, data} records. */
export async function* serverSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) !== -1) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const text = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
      }
      if (data.length) yield { event, data: data.join("\n") };
    }
  }
}

/** Copy only the result fields of the shared contract, with their types. */
export function sanitizeResult(r) {
  const base = emptyResult(typeof r.runtime === "string" ? r.runtime : "");
  const out = { ...base };
  const statuses = Object.values(STATUS);
  out.status = statuses.includes(r.status) ? r.status : STATUS.INTERNAL_ERROR;
  out.exit_code = Number.isInteger(r.exit_code) ? r.exit_code : null;
  for (const key of ["stdout", "stderr", "message"]) out[key] = typeof r[key] === "string" ? r[key] : "";
  for (const key of ["stdout_truncated", "stderr_truncated"]) out[key] = r[key] === true;
  out.fuel_used = Number.isFinite(r.fuel_used) ? r.fuel_used : 0;
  out.wall_ms = Number.isFinite(r.wall_ms) ? r.wall_ms : 0;
  out.limit = typeof r.limit === "string" ? r.limit : null;
  out.files = Array.isArray(r.files) ? r.files.filter((f) => f && typeof f.path === "string") : [];
  out.outputs = Array.isArray(r.outputs)
    ? r.outputs.filter((o) => o && typeof o.kind === "string" && typeof o.mime === "string" && typeof o.data === "string")
      .map(sanitizeOutput)
    : [];
  if (Number.isFinite(r.stop_ms)) out.stop_ms = r.stop_ms;
  if (Number.isFinite(r.input_wait_ms)) out.input_wait_ms = r.input_wait_ms;
  if (typeof r.python === "string" && /^[\w.+-]{1,20}$/.test(r.python)) out.python = r.python;
  if (r.limits && typeof r.limits === "object") {
    out.limits = {};
    for (const [k, v] of Object.entries(r.limits)) if (/^\w{1,40}$/.test(k) && Number.isFinite(v)) out.limits[k] = v;
  }
  out.explanation = sanitizeExplanation(r.explanation);
  if (isPackageNames(r.refused_packages) && r.refused_packages.length) out.refused_packages = [...r.refused_packages];
  if (r.missing && typeof r.missing === "object" && typeof r.missing.module === "string") {
    const m = r.missing;
    out.missing = { module: m.module, package: typeof m.package === "string" ? m.package : null, reason: m.reason === "unreachable" ? "unreachable" : "not_listed", index: typeof m.index === "string" ? m.index : "", detail: typeof m.detail === "string" ? m.detail : "" };
    if (typeof m.sentence === "string") out.missing.sentence = m.sentence;
    if (m.tier === "server") out.missing.tier = "server";
  }
  return out;
}

/** One rich output: kind, mime, data, and where it came among the streams (`at`, UTF-8 bytes
 * of stdout and stderr written before it; docs/notebooks.md "Order") when it says so. */
function sanitizeOutput(o) {
  const out = { kind: o.kind, mime: o.mime, data: o.data };
  const at = o.at;
  if (at && typeof at === "object" && [at.stdout, at.stderr].every((v) => Number.isSafeInteger(v) && v >= 0)) {
    out.at = { stdout: at.stdout, stderr: at.stderr };
  }
  return out;
}

/** A result's explanation (docs/explanations.md) with its fields' types, or null. */
function sanitizeExplanation(e) {
  if (!e || typeof e !== "object" || typeof e.id !== "string") return null;
  const text = (v) => (typeof v === "string" ? v.slice(0, 2000) : "");
  const out = { id: e.id.slice(0, 80), title: text(e.title), text: text(e.text), hint: text(e.hint), span: null,
    params: {}, lang: text(e.lang).slice(0, 35) };
  const s = e.span;
  if (s && typeof s === "object" && [s.line, s.col, s.end_col].every((v) => Number.isInteger(v) && v >= 0)) {
    out.span = { line: s.line, col: s.col, end_col: s.end_col };
  }
  if (e.params && typeof e.params === "object") {
    for (const [k, v] of Object.entries(e.params).slice(0, 12)) {
      if (/^\w{1,40}$/.test(k) && (typeof v === "string" || Number.isInteger(v))) out.params[k] = v;
    }
  }
  return out.title ? out : null;
}

let shared = null;

/** The packages a run asks for by name (`options.packages`): strings, as the caller gave them. */
function packagesOf(options) {
  return Array.isArray(options.packages) ? options.packages.map(String) : [];
}

/** Run `code` with a page-wide runner: `run(code, {tier: "browser"|"server"|"auto", ...})`. */
export function run(code, options = {}) {
  if (!shared) shared = new Runner();
  return shared.run(code, options);
}
