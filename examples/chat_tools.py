"""A chat app's "code mode": the model writes one program that calls two of the app's own
functions and plots the result, instead of one tool call per step (docs/host-functions.md).

The app hands the run two functions, ``list_regions`` and ``monthly_sales``; the program, which
stands here for what a model wrote, imports them from ``host``, calls them like Python functions
and plots the sales with matplotlib. The figure comes back in the result's outputs.

    python examples/chat_tools.py [--save-png sales.png]
"""

from __future__ import annotations

import argparse
import base64

from wasm_runner import HostFunctions, Limits, Status
from wasm_runner.sandbox import default_sandbox

SALES = {
    "north": [120.5, 98.0, 143.25, 160.0],
    "south": [80.0, 95.5, 101.0, 88.75],
}


def list_regions() -> list[str]:
    """The regions the shop sells in."""
    return sorted(SALES)


def monthly_sales(region: str) -> list[float]:
    """A region's sales per month, January first."""
    if region not in SALES:
        raise LookupError(f"no region {region!r}")
    return SALES[region]


MODEL_PROGRAM = """\
import matplotlib.pyplot as plt
from host import list_regions, monthly_sales

for region in list_regions():
    sales = monthly_sales(region)
    print(f"{region}: {sum(sales):.2f} in {len(sales)} months")
    plt.plot(range(1, len(sales) + 1), sales, marker="o", label=region)
plt.xlabel("month")
plt.ylabel("sales")
plt.legend()
plt.show()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save-png", help="write the figure the program drew to this file")
    args = ap.parse_args()
    functions = HostFunctions({"list_regions": list_regions, "monthly_sales": monthly_sales},
                              descriptions={"list_regions": list_regions.__doc__ or "",
                                            "monthly_sales": monthly_sales.__doc__ or ""},
                              on_call=lambda c: print(f"  [app] {c.name}: {c.outcome}, {c.request_bytes} bytes in, "
                                                      f"{c.answer_bytes} bytes out"))
    result = default_sandbox().run(MODEL_PROGRAM, functions=functions, limits=Limits(cpu_seconds=20, wall_seconds=60))
    print(result.stdout, end="")
    if result.status is not Status.OK:
        print(f"{result.status}: {result.message}\n{result.stderr}")
        return
    figures = [o for o in result.outputs if o.mime == "image/png"]
    print(f"{len(figures)} figure(s) came back")
    if args.save_png and figures:
        with open(args.save_png, "wb") as f:
            f.write(base64.b64decode(figures[0].data))


if __name__ == "__main__":
    main()
