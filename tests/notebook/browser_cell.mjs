// One program run by the browser tier's controller in Node (Pyodide), `display: true` as a
// notebook cell: the program on stdin, the result as JSON on stdout (tests/notebook/test_output_order.py).
import { readFileSync } from "node:fs";
import { createNodeController } from "../../web/src/node.js";

const code = readFileSync(0, "utf8");
const controller = createNodeController();
await controller.prefetch();
const result = await controller.run({ id: 1, code, display: true });
controller.dispose();
process.stdout.write(JSON.stringify(result));
