"""Turtle graphics without a window: wasm-runner's pure-Python ``turtle``.

Neither tier has tkinter, so this module replaces the standard ``turtle`` for the subset that
introductory courses use. It records what the turtles draw and renders it as SVG when the run
ends; the runner returns that SVG as an ``image/svg+xml`` output. The same program gives the
same bytes on the server (CPython on WASI) and in the browser (Pyodide): positions follow the
standard module's arithmetic (circles are the same polygons), exact angles use exact sines, and
every number in the SVG is rounded to two decimals.

Supported: Turtle/Pen (forward fd back bk backward left lt right rt goto setpos setposition
setx sety home setheading seth circle dot write penup pu up pendown pd down isdown pensize
width pencolor fillcolor color begin_fill end_fill filling fill hideturtle ht showturtle st
isvisible speed shape position pos xcor ycor heading towards distance clear reset
degrees radians stamp), Screen (bgcolor title setup screensize tracer update colormode
mode listen onkey onkeypress onclick ontimer onscreenclick exitonclick mainloop done bye
delay window_width window_height turtles), and the same names as module functions acting on
one default turtle. Event handlers are accepted and never called: there is no window.
"""

from __future__ import annotations

import math as _math
import re as _re

__all__ = [
    "Turtle", "Pen", "RawTurtle", "Screen", "TurtleScreen", "Terminator", "TurtleGraphicsError",
    "done", "mainloop", "exitonclick", "bye", "bgcolor", "title", "setup", "screensize", "tracer",
    "update", "colormode", "mode", "listen", "onkey", "onkeypress", "onkeyrelease", "onclick",
    "onscreenclick", "ontimer", "delay", "window_width", "window_height", "turtles", "getscreen",
    "forward", "fd", "back", "bk", "backward", "left", "lt", "right", "rt", "goto", "setpos",
    "setposition", "setx", "sety", "home", "setheading", "seth", "circle", "dot", "write",
    "penup", "pu", "up", "pendown", "pd", "down", "isdown", "pensize", "width", "pencolor",
    "fillcolor", "color", "begin_fill", "end_fill", "filling", "hideturtle", "ht", "showturtle",
    "st", "isvisible", "speed", "shape", "position", "pos", "xcor", "ycor", "heading", "towards",
    "distance", "clear", "reset", "degrees", "radians", "stamp", "getturtle", "getpen",
]

MAX_ELEMENTS = 200_000  # drawing commands kept; beyond this the drawing is cut (and says so)


class TurtleGraphicsError(Exception):
    """A bad argument to a turtle command (same name as the standard module's)."""


class Terminator(Exception):
    """Raised by the standard module when its window closes; never raised here."""


_NAMED = _re.compile(r"^[A-Za-z]{1,40}$")
_HEX = _re.compile(r"^#(?:[0-9A-Fa-f]{3}|[0-9A-Fa-f]{6})$")


def _num(value, what="value"):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise TurtleGraphicsError(f"bad {what}: {value!r}") from None
    value = float(value)
    if not _math.isfinite(value):
        raise TurtleGraphicsError(f"bad {what}: {value!r}")
    return value


def _fmt(value):
    """A number as the SVG writes it: two decimals, no trailing zeros, never "-0"."""
    text = "%.2f" % value
    text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class _World:
    """What every turtle drew, in order, plus the screen's settings."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.items = []  # (kind, data, color, extra, owner): "path", "fill", "dot", "text", "turtle"
        self.turtles = []
        self.bg = "white"
        self.colormode = 1.0
        self.title = ""
        self.cut = False

    def add(self, item):
        if len(self.items) >= MAX_ELEMENTS:
            self.cut = True
            return False
        self.items.append(item)
        return True

    def drawn(self):
        return bool(self.items or self.turtles) or self.bg != "white"


_world = _World()


def _color(args, what="color"):
    """A color argument as SVG text: a name, #rgb/#rrggbb, or (r, g, b) in the colormode."""
    if len(args) == 1:
        args = args[0]
        if isinstance(args, str):
            text = args.strip()
            if _NAMED.match(text):
                return text.lower()
            if _HEX.match(text):
                return text.lower()
            raise TurtleGraphicsError(f"bad color string: {args!r}")
    if isinstance(args, (tuple, list)) and len(args) == 3:
        mode = _world.colormode
        parts = []
        for c in args:
            c = _num(c, "color component")
            if not 0 <= c <= mode:
                raise TurtleGraphicsError(f"bad color sequence: {tuple(args)!r}")
            parts.append(int(round(c * 255 / mode)))
        return "#%02x%02x%02x" % tuple(parts)
    raise TurtleGraphicsError(f"bad {what} arguments: {args!r}")


def _sincos(degrees):
    """(cos, sin) of an angle in degrees, exact at multiples of 90."""
    d = degrees % 360.0
    exact = {0.0: (1.0, 0.0), 90.0: (0.0, 1.0), 180.0: (-1.0, 0.0), 270.0: (0.0, -1.0)}
    if d in exact:
        return exact[d]
    r = d * _math.pi / 180.0
    return _math.cos(r), _math.sin(r)


class Turtle:
    """One turtle: position, heading (degrees, 0 = east, counter-clockwise), pen and fill."""

    def __init__(self, shape="classic", undobuffersize=1000, visible=True):
        self._fullcircle = 360.0
        self._visible = bool(visible)
        self._shape = shape
        self._reset_state()
        _world.turtles.append(self)

    def _reset_state(self):
        self._x = 0.0
        self._y = 0.0
        self._heading = 0.0
        self._down = True
        self._pencolor = "black"
        self._fillcolor = "black"
        self._width = 1.0
        self._path = None  # the points of the line being drawn, or None
        self._fill = None  # the points of the fill being recorded, or None
        self._fill_at = 0
        self._moved = False

    # -- drawing -----------------------------------------------------------------------------
    def _start_path(self):
        self._path = [(self._x, self._y)]
        if not _world.add(("path", self._path, self._pencolor, self._width, self)):
            self._path = None

    def _end_path(self):
        self._path = None

    def _move(self, x, y):
        x, y = _num(x, "coordinate"), _num(y, "coordinate")
        if self._down:
            if self._path is None:
                self._start_path()
            if self._path is not None:
                self._path.append((x, y))
        if self._fill is not None:
            self._fill.append((x, y))
        self._x, self._y = x, y
        self._moved = True

    def forward(self, distance):
        d = _num(distance, "distance")
        c, s = _sincos(self._heading * 360.0 / self._fullcircle)
        self._move(self._x + d * c, self._y + d * s)

    fd = forward

    def back(self, distance):
        self.forward(-_num(distance, "distance"))

    bk = backward = back

    def left(self, angle):
        self._heading = (self._heading + _num(angle, "angle")) % self._fullcircle

    lt = left

    def right(self, angle):
        self.left(-_num(angle, "angle"))

    rt = right

    def goto(self, x, y=None):
        if y is None:
            x, y = x
        self._move(x, y)

    setpos = setposition = goto

    def setx(self, x):
        self._move(x, self._y)

    def sety(self, y):
        self._move(self._x, y)

    def home(self):
        self._move(0.0, 0.0)
        self._heading = 0.0

    def setheading(self, to_angle):
        self._heading = _num(to_angle, "angle") % self._fullcircle

    seth = setheading

    def circle(self, radius, extent=None, steps=None):
        """As the standard module: a regular polygon of ``steps`` sides (chosen from the radius)."""
        radius = _num(radius, "radius")
        full = self._fullcircle
        extent = full if extent is None else _num(extent, "extent")
        if steps is None:
            frac = abs(extent) / full
            steps = 1 + int(min(11 + abs(radius) / 6.0, 59.0) * frac)
        steps = int(steps)
        if steps < 1:
            raise TurtleGraphicsError("steps must be at least 1")
        w = 1.0 * extent / steps
        w2 = 0.5 * w
        length = 2.0 * radius * _math.sin(w2 * _math.pi / full * 2)
        if radius < 0:
            length, w, w2 = -length, -w, -w2
        self.left(w2)
        for _ in range(steps):
            self.forward(length)
            self.left(w)
        self.left(-w2)

    def dot(self, size=None, *color):
        size = max(self._width + 4, self._width * 2) if size is None else _num(size, "size")
        fill = _color(color) if color else self._pencolor
        _world.add(("dot", (self._x, self._y), fill, size, self))
        self._end_path()

    def write(self, arg, move=False, align="left", font=("Arial", 8, "normal")):
        text = str(arg)[:1000]
        anchor = {"left": "start", "center": "middle", "right": "end"}.get(str(align).lower(), "start")
        try:
            family, size = str(font[0]), int(font[1])
            style = str(font[2]) if len(font) > 2 else "normal"
        except (TypeError, ValueError, IndexError):
            raise TurtleGraphicsError(f"bad font: {font!r}") from None
        family = _re.sub(r"[^A-Za-z0-9 _-]", "", family)[:40] or "sans-serif"
        size = max(1, min(size, 200))
        _world.add(("text", (self._x, self._y), self._pencolor, (text, anchor, family, size, style), self))
        self._end_path()

    def stamp(self):
        _world.add(("turtle", (self._x, self._y), self._heading * 360.0 / self._fullcircle,
                    (self._pencolor, self._fillcolor), self))
        self._end_path()
        return len(_world.items)

    # -- pen -----------------------------------------------------------------------------------
    def penup(self):
        self._down = False
        self._end_path()

    pu = up = penup

    def pendown(self):
        if not self._down:
            self._down = True
            self._end_path()

    pd = down = pendown

    def isdown(self):
        return self._down

    def pensize(self, width=None):
        if width is None:
            return self._width
        self._width = max(0.0, _num(width, "width"))
        self._end_path()

    width = pensize

    def pencolor(self, *args):
        if not args:
            return self._pencolor
        self._pencolor = _color(args, "pencolor")
        self._end_path()

    def fillcolor(self, *args):
        if not args:
            return self._fillcolor
        self._fillcolor = _color(args, "fillcolor")

    def color(self, *args):
        if not args:
            return self._pencolor, self._fillcolor
        if len(args) == 2 and not all(isinstance(a, (int, float)) for a in args):
            self.pencolor(args[0])
            self.fillcolor(args[1])
        else:
            c = _color(args)
            self.pencolor(c)
            self._fillcolor = c

    def begin_fill(self):
        self._fill = [(self._x, self._y)]
        self._fill_at = len(_world.items)
        _world.add(("fill-mark", None, None, None, self))  # the fill goes under what it encloses
        self._end_path()

    def end_fill(self):
        if self._fill is not None:
            if len(self._fill) > 2 and self._fill_at < len(_world.items):
                _world.items[self._fill_at] = ("fill", self._fill, self._fillcolor, None, self)
            self._fill = None
            self._end_path()

    def filling(self):
        return self._fill is not None

    def fill(self, flag=None):  # the old turtle API
        if flag is None:
            return self.filling()
        self.begin_fill() if flag else self.end_fill()

    # -- state ---------------------------------------------------------------------------------
    def hideturtle(self):
        self._visible = False

    ht = hideturtle

    def showturtle(self):
        self._visible = True

    st = showturtle

    def isvisible(self):
        return self._visible

    def speed(self, speed=None):
        return 0 if speed is None else None

    def shape(self, name=None):
        if name is None:
            return self._shape
        self._shape = str(name)

    def shapesize(self, *args, **kwargs):
        return None

    turtlesize = shapesize

    def position(self):
        return Vec2D(self._x, self._y)

    pos = position

    def xcor(self):
        return self._x

    def ycor(self):
        return self._y

    def heading(self):
        return self._heading

    def towards(self, x, y=None):
        if y is None:
            x, y = x
        dx, dy = _num(x) - self._x, _num(y) - self._y
        return round(_math.degrees(_math.atan2(dy, dx)), 10) % 360.0 * self._fullcircle / 360.0

    def distance(self, x, y=None):
        if y is None:
            x, y = x
        return _math.hypot(_num(x) - self._x, _num(y) - self._y)

    def degrees(self, fullcircle=360.0):
        self._heading = self._heading * _num(fullcircle) / self._fullcircle
        self._fullcircle = _num(fullcircle)

    def radians(self):
        self.degrees(2 * _math.pi)

    def clear(self):
        _world.items = [i for i in _world.items if i[4] is not self]
        self._end_path()

    def reset(self):
        self.clear()
        self._reset_state()

    def getscreen(self):
        return Screen()

    def getturtle(self):
        return self

    getpen = getturtle

    def onclick(self, fun, btn=1, add=None):
        return None

    onrelease = ondrag = onclick

    def undo(self):
        return None


Pen = RawTurtle = Turtle


class Vec2D(tuple):
    """A 2D vector, as the standard module returns for ``position()``."""

    def __new__(cls, x, y):
        return tuple.__new__(cls, (x, y))

    def __add__(self, other):
        return Vec2D(self[0] + other[0], self[1] + other[1])

    def __sub__(self, other):
        return Vec2D(self[0] - other[0], self[1] - other[1])

    def __mul__(self, other):
        if isinstance(other, Vec2D):
            return self[0] * other[0] + self[1] * other[1]
        return Vec2D(self[0] * other, self[1] * other)

    __rmul__ = __mul__

    def __neg__(self):
        return Vec2D(-self[0], -self[1])

    def __abs__(self):
        return _math.hypot(*self)

    def __repr__(self):
        return "(%.2f,%.2f)" % self


class _Screen:
    """The one screen: background, colormode; window and event calls do nothing."""

    def bgcolor(self, *args):
        if not args:
            return _world.bg
        _world.bg = _color(args, "bgcolor")

    def title(self, text):
        _world.title = str(text)[:200]

    def colormode(self, cmode=None):
        if cmode is None:
            return _world.colormode
        if cmode not in (1, 1.0, 255):
            raise TurtleGraphicsError(f"colormode must be 1.0 or 255, not {cmode!r}")
        _world.colormode = float(cmode)

    def mode(self, mode=None):
        return "standard" if mode is None else None

    def setup(self, *args, **kwargs):
        return None

    def screensize(self, *args, **kwargs):
        return (400, 300) if not args and not kwargs else None

    def tracer(self, n=None, delay=None):
        return 1 if n is None else None

    def update(self):
        return None

    def delay(self, delay=None):
        return 0 if delay is None else None

    def listen(self, *args):
        return None

    def onkey(self, fun, key=None):
        return None

    onkeypress = onkeyrelease = onkey

    def onclick(self, fun, btn=1, add=None):
        return None

    onscreenclick = onclick

    def ontimer(self, fun, t=0):
        return None

    def mainloop(self):
        return None

    done = exitonclick = bye = mainloop

    def window_width(self):
        return 400

    def window_height(self):
        return 300

    def turtles(self):
        return list(_world.turtles)

    def clear(self):
        _world.items = []

    clearscreen = clear

    def reset(self):
        for t in _world.turtles:
            t.reset()

    resetscreen = reset

    def getcanvas(self):
        raise TurtleGraphicsError("there is no canvas: wasm-runner draws turtles as SVG")


_screen = _Screen()


def Screen():
    return _screen


TurtleScreen = _Screen

_default = None


def _pen():
    global _default
    if _default is None or _default not in _world.turtles:
        _default = Turtle()
    return _default


def getturtle():
    return _pen()


getpen = getturtle


def getscreen():
    return _screen


def _delegate(name):
    def call(*args, **kwargs):
        return getattr(_pen(), name)(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"``{name}`` of the default turtle."
    return call


for _name in ("forward", "fd", "back", "bk", "backward", "left", "lt", "right", "rt", "goto",
              "setpos", "setposition", "setx", "sety", "home", "setheading", "seth", "circle",
              "dot", "write", "penup", "pu", "up", "pendown", "pd", "down", "isdown", "pensize",
              "width", "pencolor", "fillcolor", "color", "begin_fill", "end_fill", "filling",
              "fill", "hideturtle", "ht", "showturtle", "st", "isvisible", "speed", "shape",
              "shapesize", "turtlesize", "position", "pos", "xcor", "ycor", "heading", "towards",
              "distance", "clear", "reset", "degrees", "radians", "stamp", "undo"):
    globals()[_name] = _delegate(_name)

for _name in ("bgcolor", "title", "setup", "screensize", "tracer", "update", "colormode",
              "mode", "listen", "onkey", "onkeypress", "onkeyrelease", "onclick", "onscreenclick",
              "ontimer", "mainloop", "done", "exitonclick", "bye", "delay", "window_width",
              "window_height", "turtles", "clearscreen", "resetscreen"):
    globals()[_name] = getattr(_screen, _name)
del _name


# -- SVG ---------------------------------------------------------------------------------------
def _esc(text):
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _pt(p):
    return "%s,%s" % (_fmt(p[0]), _fmt(-p[1]))


def _arrow(x, y, heading, pen, fill):
    """The classic turtle cursor: an arrowhead at (x, y) pointing along ``heading``."""
    shape = ((0, 0), (-9, 5), (-7, 0), (-9, -5))
    c, s = _sincos(heading)
    pts = [(x + px * c - py * s, y + px * s + py * c) for px, py in shape]
    return '<polygon points="%s" fill="%s" stroke="%s" stroke-width="1"/>' % (
        " ".join(_pt(p) for p in pts), fill, pen)


def svg():
    """The drawing so far as an SVG document (text), or None when nothing was drawn."""
    if not _world.drawn():
        return None
    xs, ys = [0.0], [0.0]
    body = []
    for kind, data, color, extra, _owner in _world.items:
        if kind == "path" and len(data) > 1:
            for x, y in data:
                xs.append(x)
                ys.append(y)
            if extra > 0:
                body.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="%s" '
                            'stroke-linecap="round" stroke-linejoin="round"/>'
                            % (" ".join(_pt(p) for p in data), color, _fmt(extra)))
        elif kind == "fill":
            for x, y in data:
                xs.append(x)
                ys.append(y)
            body.append('<polygon points="%s" fill="%s" stroke="none"/>'
                        % (" ".join(_pt(p) for p in data), color))
        elif kind == "dot":
            xs += [data[0] - extra / 2, data[0] + extra / 2]
            ys += [data[1] - extra / 2, data[1] + extra / 2]
            body.append('<circle cx="%s" cy="%s" r="%s" fill="%s"/>'
                        % (_fmt(data[0]), _fmt(-data[1]), _fmt(extra / 2), color))
        elif kind == "text":
            text, anchor, family, size, style = extra
            xs += [data[0] - size * len(text), data[0] + size * len(text)]
            ys += [data[1], data[1] + size * 1.5]
            weight = ' font-weight="bold"' if "bold" in style else ""
            italic = ' font-style="italic"' if "italic" in style else ""
            body.append('<text x="%s" y="%s" fill="%s" font-family="%s" font-size="%s" '
                        'text-anchor="%s"%s%s>%s</text>'
                        % (_fmt(data[0]), _fmt(-data[1]), color, family, size, anchor,
                           weight, italic, _esc(text)))
        elif kind == "turtle":
            xs += [data[0] - 10, data[0] + 10]
            ys += [data[1] - 10, data[1] + 10]
            body.append(_arrow(data[0], data[1], color, extra[0], extra[1]))
    for t in _world.turtles:
        if t._visible:
            xs += [t._x - 10, t._x + 10]
            ys += [t._y - 10, t._y + 10]
            body.append(_arrow(t._x, t._y, t._heading * 360.0 / t._fullcircle,
                               t._pencolor, t._fillcolor))
    pad = 10.0 + max([1.0] + [t._width for t in _world.turtles])
    left, right = min(xs) - pad, max(xs) + pad
    bottom, top = min(ys) - pad, max(ys) + pad
    width, height = right - left, top - bottom
    title = "<title>%s</title>" % _esc(_world.title) if _world.title else ""
    note = "<!-- drawing cut at %d elements -->" % MAX_ELEMENTS if _world.cut else ""
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="%s %s %s %s" width="%s" height="%s">'
        '%s%s<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>%s</svg>'
        % (_fmt(left), _fmt(-top), _fmt(width), _fmt(height), _fmt(min(width, 800)),
           _fmt(min(width, 800) * height / width), title, note, _fmt(left), _fmt(-top),
           _fmt(width), _fmt(height), _world.bg, "".join(body))
    )


def _wr_take_svg():
    """For the runner: the drawing as SVG (or None), then a clean slate for the next run."""
    global _default
    try:
        return svg()
    finally:
        _world.reset()
        _default = None
