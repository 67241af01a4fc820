// What a run's rich outputs need beyond the DOM (bundled to dist/rich.js, loaded by render.js
// the first time a bundle holds HTML or LaTeX): DOMPurify for HTML the program made (a pandas
// table, a user's _repr_html_) and KaTeX for LaTeX (sympy, _repr_latex_), both served from our
// own origin. The HTML comes from code nobody trusts and is shown in the page itself: no script,
// no event handler, no style (a <style> would restyle the whole page), no form, no frame.

import DOMPurify from "dompurify";
import katex from "katex";

const HTML_RULES = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "link", "meta", "base"],
  FORBID_ATTR: ["style", "id", "name", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
};

/** The program's HTML as a sanitised DocumentFragment. */
export function sanitizedHtml(html) {
  return DOMPurify.sanitize(String(html), HTML_RULES);
}

// $$...$$, \[...\], \(...\) and $...$: Jupyter's math delimiters
const MATH = /(\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$[^$\n]+?\$)/;

function renderMath(part, into) {
  const display = part.startsWith("$$") || part.startsWith("\\[");
  const body = part.startsWith("$$") ? part.slice(2, -2) : part.startsWith("$") ? part.slice(1, -1) : part.slice(2, -2);
  const span = document.createElement(display ? "div" : "span");
  katex.render(body, span, { displayMode: display, throwOnError: false, trust: false, maxSize: 50, maxExpand: 1000, strict: "ignore" });
  into.append(span);
}

/** LaTeX text (math in Jupyter's delimiters, text around it) rendered into `element`. */
export function renderLatex(source, element) {
  const text = String(source).trim();
  const parts = text.split(MATH).filter((part) => part !== "");
  if (parts.length === 1 && !MATH.test(text)) {
    renderMath(`$$${text}$$`, element); // LaTeX without delimiters: one formula, as Jupyter shows it
    return;
  }
  for (const part of parts) {
    if (MATH.test(part) && part.match(MATH)[0] === part) renderMath(part, element);
    else element.append(document.createTextNode(part));
  }
}
