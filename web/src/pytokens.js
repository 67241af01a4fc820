// A small Python tokenizer for the editor's own lint rules (lint-own.js): just what they need to
// rebuild statements and blocks — names and keywords, numbers, strings (prefixes, triple quotes,
// f- and t-strings with their nested fields and quotes), brackets, operators, logical line ends
// (Newline), Indent / Dedent; comments, blank lines and continuation lines leave no token. Token
// kinds are named as Ruff's lexer names them. It assumes code Python can read: the lint asks
// Ruff first and runs our rules only when Ruff finds no syntax error. Pure, one pass, no regex
// per character: a 300-line file takes well under a millisecond (Ruff's WebAssembly build also
// lists tokens, `Workspace.tokens`, but as text that costs about twice its whole check).

const KEYWORDS = new Map(Object.entries({
  False: "False", None: "None", True: "True", and: "And", as: "As", assert: "Assert", async: "Async",
  await: "Await", break: "Break", class: "Class", continue: "Continue", def: "Def", del: "Del", elif: "Elif",
  else: "Else", except: "Except", finally: "Finally", for: "For", from: "From", global: "Global", if: "If",
  import: "Import", in: "In", is: "Is", lambda: "Lambda", nonlocal: "Nonlocal", not: "Not", or: "Or",
  pass: "Pass", raise: "Raise", return: "Return", try: "Try", while: "While", with: "With", yield: "Yield",
}));
const OPERATORS = [
  ["**=", "DoubleStarEqual"], ["//=", "DoubleSlashEqual"], [">>=", "RightShiftEqual"], ["<<=", "LeftShiftEqual"],
  ["...", "Ellipsis"], ["**", "DoubleStar"], ["//", "DoubleSlash"], [">>", "RightShift"], ["<<", "LeftShift"],
  ["==", "EqEqual"], ["!=", "NotEqual"], ["<=", "LessEqual"], [">=", "GreaterEqual"], ["->", "Rarrow"],
  [":=", "ColonEqual"], ["+=", "PlusEqual"], ["-=", "MinusEqual"], ["*=", "StarEqual"], ["/=", "SlashEqual"],
  ["%=", "PercentEqual"], ["@=", "AtEqual"], ["&=", "AmperEqual"], ["|=", "VbarEqual"], ["^=", "CircumflexEqual"],
  ["+", "Plus"], ["-", "Minus"], ["*", "Star"], ["/", "Slash"], ["%", "Percent"], ["@", "At"], ["&", "Amper"],
  ["|", "Vbar"], ["^", "CircumFlex"], ["~", "Tilde"], ["<", "Less"], [">", "Greater"], ["=", "Equal"],
  [".", "Dot"], [",", "Comma"], [":", "Colon"], [";", "Semi"], ["!", "Exclamation"],
  ["(", "Lpar"], [")", "Rpar"], ["[", "Lsqb"], ["]", "Rsqb"], ["{", "Lbrace"], ["}", "Rbrace"],
];
const OPERATORS_BY_FIRST = new Map(); // longest first, as listed
for (const op of OPERATORS) {
  if (!OPERATORS_BY_FIRST.has(op[0][0])) OPERATORS_BY_FIRST.set(op[0][0], []);
  OPERATORS_BY_FIRST.get(op[0][0]).push(op);
}
const STRING_PREFIXES = new Set(["r", "u", "b", "br", "rb", "f", "fr", "rf", "t", "tr", "rt"]);

const isDigit = (c) => c >= 48 && c <= 57;
const isNameStart = (c) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 128;
const isNamePart = (c) => isNameStart(c) || isDigit(c);
const isSpace = (c) => c === 32 || c === 9 || c === 12;

/** The tokens of `code`: [{kind, start, end, text?}], offsets in UTF-16 units (JavaScript's). */
export function pythonTokens(code) {
  const n = code.length;
  const out = [];
  const indents = [0];
  let i = 0;
  let depth = 0; // brackets open: inside them, line ends and indentation do not count
  let lineHasTokens = false;
  let atLineStart = true;

  // the end of a string starting at `at` (after its prefix), f-/t-string fields included
  const stringEnd = (at, formatted) => {
    const quote = code[at];
    const triple = code.startsWith(quote.repeat(3), at);
    const close = triple ? quote.repeat(3) : quote;
    let j = at + close.length;
    while (j < n) {
      const ch = code[j];
      if (ch === "\\") { j += 2; continue; }
      if (code.startsWith(close, j)) return j + close.length;
      if (!triple && ch === "\n") return j; // unterminated: Ruff reports it, our rules do not run
      if (formatted && ch === "{") {
        if (code[j + 1] === "{") { j += 2; continue; }
        j = fieldEnd(j + 1);
        continue;
      }
      j++;
    }
    return n;
  };

  // the end of an f-string's replacement field, from just after its `{`: code, then `!r`, `:spec`
  const fieldEnd = (at) => {
    let j = at;
    let nested = 0;
    while (j < n) {
      const c = code.charCodeAt(j);
      const ch = code[j];
      if (ch === "'" || ch === '"') { j = stringEnd(j, false); continue; }
      if (isNameStart(c)) {
        let k = j;
        while (k < n && isNamePart(code.charCodeAt(k))) k++;
        const word = code.slice(j, k).toLowerCase();
        if (STRING_PREFIXES.has(word) && (code[k] === "'" || code[k] === '"')) {
          j = stringEnd(k, word.includes("f") || word.includes("t"));
        } else {
          j = k;
        }
        continue;
      }
      if (ch === "(" || ch === "[" || ch === "{") nested++;
      else if (ch === ")" || ch === "]") nested--;
      else if (ch === "}") { if (nested === 0) return j + 1; nested--; }
      else if (nested === 0 && ch === "!" && code[j + 1] !== "=") return specEnd(j + 1);
      else if (nested === 0 && ch === ":") return specEnd(j + 1);
      j++;
    }
    return n;
  };

  // the end of a conversion / format spec: literal text with nested fields, up to the field's `}`
  const specEnd = (at) => {
    let j = at;
    while (j < n) {
      const ch = code[j];
      if (ch === "}") return j + 1;
      if (ch === "{") { j = fieldEnd(j + 1); continue; }
      j++;
    }
    return n;
  };

  const push = (kind, start, end) => { out.push({ kind, start, end }); lineHasTokens = true; };

  while (i < n) {
    if (atLineStart && depth === 0) {
      let col = 0;
      let j = i;
      for (; j < n; j++) {
        const c = code.charCodeAt(j);
        if (c === 32) col++;
        else if (c === 9) col = (Math.floor(col / 8) + 1) * 8;
        else if (c === 12) col = 0;
        else break;
      }
      i = j;
      atLineStart = false;
      const c = code.charCodeAt(i);
      if (i >= n || c === 10 || c === 13 || c === 35) {
        // a blank or comment-only line: no indentation change
      } else if (col > indents.at(-1)) {
        indents.push(col);
        out.push({ kind: "Indent", start: i, end: i });
      } else {
        while (col < indents.at(-1)) { indents.pop(); out.push({ kind: "Dedent", start: i, end: i }); }
      }
      continue;
    }
    const c = code.charCodeAt(i);
    const ch = code[i];
    if (isSpace(c)) { i++; continue; }
    if (ch === "#") { while (i < n && code[i] !== "\n" && code[i] !== "\r") i++; continue; }
    if (ch === "\\" && (code[i + 1] === "\n" || code[i + 1] === "\r")) {
      i += code.startsWith("\r\n", i + 1) ? 3 : 2;
      continue;
    }
    if (ch === "\n" || ch === "\r") {
      const start = i;
      i += code.startsWith("\r\n", i) ? 2 : 1;
      if (depth === 0) {
        if (lineHasTokens) out.push({ kind: "Newline", start, end: i });
        lineHasTokens = false;
        atLineStart = true;
      }
      continue;
    }
    if (ch === "'" || ch === '"') { const end = stringEnd(i, false); push("String", i, end); i = end; continue; }
    if (isNameStart(c)) {
      let k = i;
      while (k < n && isNamePart(code.charCodeAt(k))) k++;
      const word = code.slice(i, k);
      const lower = word.toLowerCase();
      if (STRING_PREFIXES.has(lower) && (code[k] === "'" || code[k] === '"')) {
        const formatted = lower.includes("f") || lower.includes("t");
        const end = stringEnd(k, formatted);
        push(formatted ? "FStringEnd" : "String", i, end); // one token for the whole string
        i = end;
        continue;
      }
      const keyword = KEYWORDS.get(word);
      out.push({ kind: keyword ?? "Identifier", start: i, end: k, text: word });
      lineHasTokens = true;
      i = k;
      continue;
    }
    if (isDigit(c) || (ch === "." && isDigit(code.charCodeAt(i + 1)))) {
      let k = i;
      const radix = ch === "0" && /[xXoObB]/.test(code[i + 1] ?? "");
      while (k < n) {
        const d = code[k];
        if (isNamePart(code.charCodeAt(k)) || d === ".") k++;
        else if (!radix && (d === "+" || d === "-") && /[eE]/.test(code[k - 1])) k++;
        else break;
      }
      push("Int", i, k);
      i = k;
      continue;
    }
    const op = OPERATORS_BY_FIRST.get(ch)?.find(([text]) => code.startsWith(text, i));
    if (!op) { push("Unknown", i, i + 1); i++; continue; }
    const [text, kind] = op;
    if (kind === "Lpar" || kind === "Lsqb" || kind === "Lbrace") depth++;
    else if ((kind === "Rpar" || kind === "Rsqb" || kind === "Rbrace") && depth > 0) depth--;
    push(kind, i, i + text.length);
    i += text.length;
  }
  if (lineHasTokens) out.push({ kind: "Newline", start: n, end: n });
  for (let k = 1; k < indents.length; k++) out.push({ kind: "Dedent", start: n, end: n });
  return out;
}
