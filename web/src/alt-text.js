// Text alternatives for the pictures a program draws, so a screen reader says what is there:
// the turtle's SVG (wasm_runner/guest/lib/turtle.py writes it: a <polyline> per pen stroke, a
// stroke-less <polygon> per filled shape, a <circle> per dot, <text> for write(), a polygon with a
// stroke for each visible turtle, <title> for the screen's title) is read as text, never run.

const ENTITIES = { "&lt;": "<", "&gt;": ">", "&quot;": "\"", "&#39;": "'", "&amp;": "&" };
const unescape = (text) => text.replace(/&(lt|gt|quot|#39|amp);/g, (e) => ENTITIES[e]);
const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const MAX_COLOURS = 4;
const MAX_TEXTS = 3;

function colours(tags, attribute) {
  const found = [];
  for (const tag of tags) {
    const match = new RegExp(`${attribute}="([^"]*)"`).exec(tag);
    if (match && match[1] !== "none" && !found.includes(match[1])) found.push(match[1]);
  }
  if (!found.length) return "";
  const shown = found.slice(0, MAX_COLOURS).join(", ");
  return found.length > MAX_COLOURS ? ` (${shown} and more)` : ` (${shown})`;
}

/** "Turtle drawing: <title>. 1 pen stroke (red), 1 filled shape (blue), 2 dots, the text “Hi”, 1 turtle." */
export function describeTurtleDrawing(svg) {
  const tags = (name) => svg.match(new RegExp(`<${name}\\b[^>]*>`, "g")) || [];
  const lines = tags("polyline");
  const polygons = tags("polygon");
  const shapes = polygons.filter((tag) => tag.includes('stroke="none"'));
  const turtles = polygons.length - shapes.length;
  const dots = tags("circle");
  const texts = Array.from(svg.matchAll(/<text\b[^>]*>([^<]*)<\/text>/g), (m) => `“${unescape(m[1])}”`);
  const title = /<title>([^<]*)<\/title>/.exec(svg);
  const parts = [];
  if (lines.length) parts.push(plural(lines.length, "pen stroke") + colours(lines, "stroke"));
  if (shapes.length) parts.push(plural(shapes.length, "filled shape") + colours(shapes, "fill"));
  if (dots.length) parts.push(plural(dots.length, "dot") + colours(dots, "fill"));
  if (texts.length) parts.push(`the ${texts.length === 1 ? "text" : "texts"} ${texts.slice(0, MAX_TEXTS).join(", ")}${texts.length > MAX_TEXTS ? "…" : ""}`);
  if (turtles) parts.push(plural(turtles, "turtle"));
  const head = title ? `Turtle drawing: ${unescape(title[1])}` : "Turtle drawing";
  return `${head}. ${parts.length ? parts.join(", ") : "Nothing drawn"}.`;
}

/** The alternative of the n-th figure (a PNG from matplotlib) of a run. */
export function describeFigure(number) {
  return `Figure ${number} drawn by the program (a chart image; what it shows comes from the program's data)`;
}
