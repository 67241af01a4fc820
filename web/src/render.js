// Shows a run's output in an element: streamed text (stdout/stderr), images, and the end line.

export class OutputView {
  constructor(element) {
    this.element = element;
    this.last = null;
  }

  clear() {
    this.element.replaceChildren();
    this.last = null;
  }

  text(stream, text) {
    if (!this.last || this.last.dataset.stream !== stream) {
      this.last = document.createElement("span");
      this.last.className = `out-${stream}`;
      this.last.dataset.stream = stream;
      this.element.appendChild(this.last);
    }
    this.last.textContent += text;
    this.element.scrollTop = this.element.scrollHeight;
  }

  rich(output) {
    if (output.kind === "image" && /^image\/(png|jpeg|gif|webp)$/.test(output.mime)) {
      const img = document.createElement("img");
      img.src = `data:${output.mime};base64,${output.data}`;
      img.alt = "Figure produced by the program";
      img.className = "out-image";
      this.element.appendChild(img);
    } else if (output.kind === "text" || output.kind === "table") {
      const pre = document.createElement("pre");
      pre.textContent = output.data;
      this.element.appendChild(pre);
    }
    this.last = null;
  }

  echo(text) {
    this.text("stdin", `${text}\n`);
  }

  end(result) {
    const line = document.createElement("div");
    line.className = `out-end status-${result.status}`;
    const ms = Math.round(result.wall_ms);
    const where = result.tier ? ` · ${result.tier}` : "";
    line.textContent = result.status === "ok"
      ? `✓ finished in ${ms} ms${where}`
      : `${result.status}: ${result.message || "the run did not finish"}${where}`;
    this.element.appendChild(line);
    this.last = null;
    this.element.scrollTop = this.element.scrollHeight;
  }
}

/** Ask for one line through a small form; resolves with the text (or null on stop). */
export function askLine(form, label, input, prompt, signal) {
  return new Promise((resolve) => {
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
