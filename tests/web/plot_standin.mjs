// The plot program the tests run: the pure-Python matplotlib stand-in (plot_standin.py), then a plot.
import { readFileSync } from "node:fs";

export const PLOT_STANDIN = readFileSync(new URL("./plot_standin.py", import.meta.url), "utf8");

export const PLOT_PROGRAM = `${PLOT_STANDIN}
import matplotlib.pyplot as plt
plt.plot(range(10), [x * x for x in range(10)])
print("plotted")
`;
