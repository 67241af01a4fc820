// wasm-runner's own lint rules, the ones Ruff lacks (issue 36 §2): code that can never run and a
// value computed then thrown away. The server computes them on Python's `ast`
// (wasm_runner/lint/own_rules.py); the page has no Python parser of its own (Ruff's WebAssembly
// build can print its tree or its tokens as text, but that costs from twice to thirty times its
// whole check), so this module rebuilds the statements and their blocks from the tokens of pytokens.js and applies the same rules, mark for mark (tests/lint/test_tiers_agree.py
// compares both on tests/lint/corpus). Pure functions.
import { pythonTokens } from "./pytokens.js";

const OPEN = new Set(["Lpar", "Lsqb", "Lbrace"]);
const CLOSE = new Set(["Rpar", "Rsqb", "Rbrace"]);
const COMPOUND = new Set(["If", "While", "For", "Try", "With", "Def", "Class", "Async"]);
const SOFT_COMPOUND = new Set(["match", "case"]); // soft keywords: a statement, or just a name
const NOT_AFTER_SOFT = new Set(["Newline", "Colon", "Equal", "Dot", "Semi", "Comma", "PlusEqual", "MinusEqual",
  "StarEqual", "SlashEqual", "DoubleSlashEqual", "PercentEqual", "DoubleStarEqual", "AtEqual", "AmperEqual",
  "VbarEqual", "CircumflexEqual", "LeftShiftEqual", "RightShiftEqual"]);
const CLAUSE = new Set(["Elif", "Else", "Except", "Finally"]);
const TERMINATORS = { Return: "return", Raise: "raise", Break: "break", Continue: "continue" };
const STATEMENT_KEYWORDS = new Set(["Pass", "Break", "Continue", "Return", "Raise", "Global", "Nonlocal", "Del",
  "Import", "From", "Assert"]);
const ASSIGNING = new Set(["Equal", "Colon", "PlusEqual", "MinusEqual", "StarEqual", "SlashEqual", "DoubleSlashEqual",
  "PercentEqual", "DoubleStarEqual", "AtEqual", "AmperEqual", "VbarEqual", "CircumflexEqual", "LeftShiftEqual",
  "RightShiftEqual"]);
// at bracket depth 0 these make the expression something looser than an arithmetic operation
const LOOSER = new Set(["Lambda", "If", "Or", "And", "Not", "In", "Is", "EqEqual", "NotEqual", "Less", "Greater",
  "LessEqual", "GreaterEqual", "Comma", "Yield", "ColonEqual", "For"]);
const BINARY = new Set(["Plus", "Minus", "Star", "Slash", "DoubleSlash", "Percent", "DoubleStar", "At", "LeftShift",
  "RightShift", "Amper", "Vbar", "CircumFlex"]);
const UNARY_FIRST = new Set(["Plus", "Minus", "Tilde"]);
const OPERAND_END = new Set(["Name", "Identifier", "Int", "Float", "Complex", "String", "FStringEnd", "TStringEnd",
  "Rpar", "Rsqb", "Rbrace", "None", "True", "False", "Ellipsis"]);

const LINE_END = new Set(["Semi", "Newline", "EOF", "Dedent", "Indent"]);

class Unreadable extends Error {}

/** Statements and their blocks: {first, end, compound, tokens (simple), heads (each clause's), blocks}. */
class Reader {
  constructor(tokens) { this.t = tokens; this.i = 0; }
  peek() { return this.t[this.i] ?? { kind: "EOF", start: 0, end: 0 }; }

  block(top) {
    const stmts = [];
    for (;;) {
      const kind = this.peek().kind;
      if (kind === "EOF") { if (top) return stmts; throw new Unreadable("eof"); }
      if (kind === "Dedent") { if (top) throw new Unreadable("dedent"); this.i++; return stmts; }
      if (kind === "Newline") { this.i++; continue; }
      if (kind === "Indent") throw new Unreadable("indent");
      const last = stmts.at(-1);
      if (CLAUSE.has(kind)) {
        if (!last || !last.compound) throw new Unreadable("clause");
        this.clause(last);
      } else {
        this.statements(stmts);
      }
    }
  }

  // one logical line: a compound statement's first clause, or simple statements split by `;`
  statements(stmts) {
    let first = this.peek();
    if (first.kind === "At") { // decorators: the statement starts at its `def` / `class`, as in ast
      while (this.peek().kind === "At") this.skipLine();
      first = this.peek();
    }
    if (COMPOUND.has(first.kind) || this.softCompound(first)) {
      const stmt = { first, end: first, compound: true, tokens: null, heads: [], blocks: [] };
      this.clause(stmt);
      stmts.push(stmt);
    } else {
      this.simple(stmts);
    }
  }

  // `match x:` / `case [a, b]:` start blocks; `match = 1`, `match(x)`, `case.upper()` are names
  softCompound(first) {
    if (first.kind !== "Identifier" || !SOFT_COMPOUND.has(first.text)) return false;
    if (NOT_AFTER_SOFT.has(this.t[this.i + 1]?.kind ?? "Newline")) return false;
    let depth = 0;
    for (let j = this.i + 1; j < this.t.length && this.t[j].kind !== "Newline"; j++) {
      const kind = this.t[j].kind;
      if (OPEN.has(kind)) depth++;
      else if (CLOSE.has(kind)) depth--;
      else if (depth === 0 && kind === "Colon") return true;
    }
    return false;
  }

  skipLine() {
    while (this.peek().kind !== "Newline") { if (this.peek().kind === "EOF") throw new Unreadable("eof"); this.i++; }
    this.i++;
  }

  // simple statements up to the end of the logical line
  simple(stmts) {
    for (;;) {
      const tokens = [];
      while (!LINE_END.has(this.peek().kind)) tokens.push(this.t[this.i++]);
      if (!tokens.length) throw new Unreadable("empty statement");
      stmts.push({ first: tokens[0], end: tokens.at(-1), compound: false, tokens, heads: [], blocks: [] });
      const kind = this.peek().kind;
      if (kind === "Semi") {
        this.i++;
        if (this.peek().kind === "Newline") { this.i++; return; }
        continue;
      }
      if (kind !== "Newline") throw new Unreadable("line end");
      this.i++;
      return;
    }
  }

  // a clause's header up to its `:`, then its body: an indented block or the rest of the line
  clause(stmt) {
    let depth = 0;
    let lambdas = 0;
    const start = this.i;
    for (;;) {
      const tok = this.t[this.i++];
      if (!tok || tok.kind === "Newline") throw new Unreadable("header");
      if (OPEN.has(tok.kind)) depth++;
      else if (CLOSE.has(tok.kind)) depth--;
      else if (depth === 0 && tok.kind === "Lambda") lambdas++;
      else if (depth === 0 && tok.kind === "Colon") { if (lambdas === 0) break; lambdas--; }
    }
    const head = this.t.slice(start, this.i - 1); // the clause's keyword up to its `:`
    let body;
    if (this.peek().kind === "Newline") {
      this.i++;
      if (this.peek().kind !== "Indent") throw new Unreadable("indent expected");
      this.i++;
      body = this.block(false);
    } else {
      body = [];
      this.simple(body);
    }
    if (!body.length) throw new Unreadable("empty body");
    stmt.heads.push(head);
    stmt.blocks.push(body);
    stmt.end = body.at(-1).end;
  }
}

const firstKeyword = (stmt) => {
  if (!stmt.compound) return stmt.first.kind;
  const [head] = stmt.heads;
  return head[0].kind === "Async" ? head[1]?.kind : head[0].kind;
};

// whether a `break` in `block` leaves the loop whose body it is (not an inner loop's)
function breaksOut(block) {
  for (const stmt of block) {
    const keyword = firstKeyword(stmt);
    if (keyword === "Break") return true;
    if (keyword === "Def" || keyword === "Class") continue;
    const loop = keyword === "For" || keyword === "While";
    const inner = loop ? stmt.blocks.filter((_, i) => stmt.heads[i][0].kind === "Else") : stmt.blocks;
    if (inner.some(breaksOut)) return true;
  }
  return false;
}

// `while True:` (in brackets or not)
function isWhileTrue(stmt) {
  if (!stmt.compound || stmt.heads[0][0].kind !== "While") return false;
  let test = stmt.heads[0].slice(1);
  while (test.length > 2 && test[0].kind === "Lpar" && closer(test, 0) === test.length - 1) test = test.slice(1, -1);
  return test.length === 1 && test[0].kind === "True";
}

// whether `block` never goes on to the statement after it (one of its statements leaves)
const ends = (block) => block.some((stmt) => leaves(stmt) !== undefined);

// the keyword after which the rest of the block never runs, if `stmt` is one
function leaves(stmt) {
  if (!stmt.compound) return TERMINATORS[stmt.first.kind];
  if (isWhileTrue(stmt) && !breaksOut(stmt.blocks[0])) return "while True"; // no way out but return / raise
  const clauses = stmt.heads.map((head) => head[0].kind);
  const blocks = (kind) => stmt.blocks.filter((_, i) => clauses[i] === kind);
  if (clauses[0] === "If" && clauses.includes("Else") && stmt.blocks.every(ends)) return "if"; // every branch leaves
  if (clauses[0] === "Try" && (blocks("Finally").some(ends)
    || (blocks("Except").every(ends) && (blocks("Try").some(ends) || blocks("Else").some(ends))))) {
    return "try"; // no way through: the try's body or else, and each except, leave (or finally does)
  }
  return undefined;
}

function isExpression(stmt) {
  if (stmt.compound) return false;
  const [first] = stmt.tokens;
  if (STATEMENT_KEYWORDS.has(first.kind)) return false;
  if (first.kind === "Lambda") return true;
  let depth = 0;
  for (const tok of stmt.tokens) {
    if (OPEN.has(tok.kind)) depth++;
    else if (CLOSE.has(tok.kind)) depth--;
    else if (depth === 0 && ASSIGNING.has(tok.kind)) return false;
  }
  return true;
}

// an expression statement whose value is an arithmetic operation (ast.BinOp) or an index (ast.Subscript)
function isThrownAway(stmt) {
  return isExpression(stmt) && isOperationOrIndex(stmt.tokens);
}

// the matching closer of the bracket at tokens[at]
function closer(tokens, at) {
  let depth = 0;
  for (let i = at; i < tokens.length; i++) {
    if (OPEN.has(tokens[i].kind)) depth++;
    else if (CLOSE.has(tokens[i].kind) && --depth === 0) return i;
  }
  return -1;
}

function isOperationOrIndex(tokens) {
  if (!tokens.length) return false;
  if (tokens[0].kind === "Lpar" && closer(tokens, 0) === tokens.length - 1) { // (n - 1): what is inside
    return isOperationOrIndex(tokens.slice(1, -1));
  }
  const first = tokens[0].kind;
  if (first === "Lambda" || first === "Yield" || first === "Not" || first === "Star") return false;
  const operators = [];
  let depth = 0;
  let opener = -1; // where the last depth-0 bracket opened
  for (let i = 0; i < tokens.length; i++) {
    const kind = tokens[i].kind;
    if (OPEN.has(kind)) { if (depth === 0) opener = i; depth++; continue; }
    if (CLOSE.has(kind)) { depth--; continue; }
    if (depth !== 0) continue;
    if (LOOSER.has(kind)) return false;
    if (BINARY.has(kind) && i > 0 && OPERAND_END.has(tokens[i - 1].kind)) operators.push(kind);
  }
  if (operators.length) return !(UNARY_FIRST.has(first) && operators.every((op) => op === "DoubleStar"));
  return !UNARY_FIRST.has(first) && first !== "Await" && tokens.at(-1).kind === "Rsqb" && opener > 0;
}

/** Offsets (UTF-16 units) to 1-based lines and columns in characters (code points). */
function positions(code) {
  const lineStarts = [0];
  for (let i = 0; i < code.length; i++) {
    const ch = code[i];
    if (ch === "\n" || (ch === "\r" && code[i + 1] !== "\n")) lineStarts.push(i + 1);
  }
  return (offset) => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (lineStarts[mid] <= offset) lo = mid; else hi = mid - 1; }
    let column = 1;
    for (let i = lineStarts[lo]; i < offset; i++) {
      const unit = code.charCodeAt(i);
      if (!(unit >= 0xdc00 && unit <= 0xdfff && i > lineStarts[lo])) column++; // a low surrogate ends a pair
    }
    return [lo + 1, column];
  };
}

/**
 * Our rules' marks for `code`: {marks: [[rule name, detail, span]], lastExpression: span | null},
 * a span being {line, column, end_line, end_column}; null when the tokens do not read as Python
 * statements (a syntax error).
 */
export function ownMarks(code) {
  let module;
  try {
    module = new Reader(pythonTokens(code)).block(true);
  } catch (err) {
    if (err instanceof Unreadable) return null;
    throw err;
  }
  const where = positions(code);
  const span = (first, last) => {
    const [line, column] = where(first.start);
    const [end_line, end_column] = where(last.end);
    return { line, column, end_line, end_column };
  };
  const marks = [];
  const unreachable = (block) => {
    for (let i = 0; i < block.length; i++) {
      const stmt = block[i];
      for (const inner of stmt.blocks) unreachable(inner);
      const keyword = leaves(stmt);
      if (keyword) {
        if (i + 1 < block.length) {
          marks.push(["unreachable-code", `Code after \`${keyword}\` never runs`, span(block[i + 1].first, block.at(-1).end)]);
        }
        return;
      }
    }
  };
  unreachable(module);
  const last = module.length && isExpression(module.at(-1)) ? module.at(-1) : null;
  const thrownAway = (block) => {
    for (const stmt of block) {
      if (stmt !== last && isThrownAway(stmt)) {
        marks.push(["thrown-away-value", "The value of this expression is not used", span(stmt.first, stmt.end)]);
      }
      stmt.blocks.forEach(thrownAway);
    }
  };
  thrownAway(module);
  return { marks, lastExpression: last ? span(last.first, last.end) : null };
}
