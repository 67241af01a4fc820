"""A pure-Python stand-in for matplotlib.pyplot, run *inside* Pyodide by the browser tests.

The real matplotlib is a compiled package that this offline machine cannot fetch. This module
implements the calls the runner's figure capture makes (get_fignums, figure, savefig to PNG,
close, show) and draws a real PNG with zlib, then registers itself as ``matplotlib.pyplot``.
"""
import os, struct, sys, types, zlib

def _png(width, height, pixels):
    raw = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

class Figure:
    def __init__(self, number):
        self.number, self.points = number, []
    def savefig(self, buffer, format="png", **options):
        w, h = 64, 48
        px = bytearray([255] * (w * h * 3))
        ys = [p[1] for p in self.points] or [0]
        lo, hi = min(ys), max(ys)
        for i, (x, y) in enumerate(self.points):
            col = int(i * (w - 1) / max(1, len(self.points) - 1))
            row = h - 1 - int((y - lo) * (h - 1) / ((hi - lo) or 1))
            px[(row * w + col) * 3:(row * w + col) * 3 + 3] = b"\x21\x56\xc7"
        buffer.write(_png(w, h, px))

pyplot = types.ModuleType("matplotlib.pyplot")
pyplot._figures, pyplot._current = {}, None
def figure(number=None):
    number = number or (max(pyplot._figures) + 1 if pyplot._figures else 1)
    pyplot._current = pyplot._figures.setdefault(number, Figure(number))
    return pyplot._current
def plot(xs, ys):
    (pyplot._current or figure()).points.extend(zip(xs, ys))
def get_fignums():
    return sorted(pyplot._figures)
def close(which="all"):
    pyplot._figures.clear(); pyplot._current = None
def show():
    pass
pyplot.figure, pyplot.plot, pyplot.get_fignums, pyplot.close, pyplot.show = figure, plot, get_fignums, close, show
package = types.ModuleType("matplotlib"); package.pyplot = pyplot
sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"] = package, pyplot
