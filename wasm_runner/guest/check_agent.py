# wasm-runner's check agent: one side of a test check whose two sides run in two instances.
#
# The **student side** loads the student's code as the module ``solution`` and then serves calls:
# the test's side asks for an attribute, a call, an operator of one of its objects, and gets the
# answer as plain data (``codec``), or a handle when the answer is not plain. The **test side**
# runs ONE teacher test (a ``test_*`` function, or the whole file) with the student's public
# names in its globals as proxies (``Remote``): every use of a proxy is a call across.
#
# Neither side reaches the other: a message goes to the host (``transport``: a write of
# ``CALL_MAGIC`` + JSON on fd 0 and a length-prefixed answer read back, on the server), the host
# checks it and hands it to the other instance. While one side waits for an answer it serves the
# other side's calls (a test function handed to the student's code is called back that way). The
# test side serves only calls of what it handed over, never attributes; its report goes to the
# host the same way, where the student's code never was. See docs/exercises.md.
#
# This file is shipped to the guests as source (``wasm_runner.exercises.crossing.program``) with
# ``codec.py`` (both sides) and ``exercises/judging.py`` (test side); it keeps no state at import.

import contextlib
import os
import sys

CALL_MAGIC = b"WRHC"
CAPTURE_MAX = 1 << 20  # characters of printed output one call brings back
# one value that crosses, at most (a bigger one crosses as a handle, or fails the call): the host
# takes messages of at most 16 MiB and 250,000 values (exercises/crossing.py)
VALUE_MAX_BYTES = 4 << 20
VALUE_MAX_ITEMS = 200_000
MAX_FRAMES = 40
STUDENT_ACTIONS = ("call", "getattr", "setattr", "delattr", "op")
# operators a proxy forwards: no operand, or one the test gives that is not an expected value
UNARY = {
    "repr": repr, "str": str, "len": len, "iter": iter, "next": next, "bool": bool,
    "float": float, "int": int, "index": lambda o: o.__index__(), "complex": complex,
    "abs": abs, "neg": lambda o: -o, "pos": lambda o: +o, "invert": lambda o: ~o,
    "enter": lambda o: o.__enter__(),
}
WITH_ARG = {
    "getitem": lambda o, k: o[k], "delitem": lambda o, k: o.__delitem__(k),
    "exit": lambda o, a, b, c: o.__exit__(a, b, c), "setitem": lambda o, k, v: o.__setitem__(k, v),
    "isinstance": lambda c, o: isinstance(o, c), "issubclass": lambda c, o: issubclass(o, c),
    "format": lambda o, spec: format(o, spec),
}
# between two of the student's objects only (a plain operand would hand it an expected value)
BINARY = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b, "matmul": lambda a, b: a @ b,
}


def fd_transport():
    """The server's channel: a call is one write on fd 0; the answer, 4 bytes of length and the
    JSON, is what fd 0 reads next."""
    write, read = os.write, os.read

    def read_exactly(n):
        data = b""
        while len(data) < n:
            chunk = read(0, n - len(data))
            if not chunk:
                os._exit(0)  # the host is gone: nothing more to do
            data += chunk
        return data

    def call(data):
        write(0, CALL_MAGIC + data)
        return read_exactly(int.from_bytes(read_exactly(4), "little"))

    return call


class Capture:
    """sys.stdout / sys.stderr during one served call: what the student's code prints."""

    def __init__(self):
        self.parts, self.size = [], 0

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if self.size < CAPTURE_MAX:
            self.parts.append(s[:CAPTURE_MAX - self.size])
            self.size += len(s)
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False

    def text(self):
        return "".join(self.parts)


class Remote:
    """An object of the other instance: each use is a call across; what comes back is plain
    data or another Remote. Equality, ordering and arithmetic only with another Remote (a plain
    operand is what a test expects: it is never handed to the student's code)."""

    __slots__ = ("_wr_link", "_wr_n", "_wr_type", "__weakref__")

    def __init__(self, link, n, type_name):
        object.__setattr__(self, "_wr_link", link)
        object.__setattr__(self, "_wr_n", n)
        object.__setattr__(self, "_wr_type", type_name)

    def __getattr__(self, name):
        if name.startswith("_wr_"):
            raise AttributeError(name)
        return self._wr_link.act(self, "getattr", name)

    def __setattr__(self, name, value):
        self._wr_link.act(self, "setattr", name, (value,))

    def __delattr__(self, name):
        self._wr_link.act(self, "delattr", name)

    def __call__(self, *args, **kwargs):
        return self._wr_link.act(self, "call", None, args, kwargs)

    def __repr__(self):
        text = self._wr_link.act(self, "op", "repr")
        return text if type(text) is str else "<%s object>" % self._wr_type

    def __str__(self):
        text = self._wr_link.act(self, "op", "str")
        return text if type(text) is str else "<%s object>" % self._wr_type

    def __hash__(self):
        return object.__hash__(self)

    def __instancecheck__(self, obj):
        if type(obj) is not Remote or obj._wr_link is not self._wr_link:
            return False
        return self._wr_link.act(self, "op", "isinstance", (obj,)) is True

    def __subclasscheck__(self, cls):
        if type(cls) is not Remote or cls._wr_link is not self._wr_link:
            return False
        return self._wr_link.act(self, "op", "issubclass", (cls,)) is True

    def __getitem__(self, key):
        return self._wr_link.act(self, "op", "getitem", (key,))

    def __setitem__(self, key, value):
        self._wr_link.act(self, "op", "setitem", (key, value))

    def __delitem__(self, key):
        self._wr_link.act(self, "op", "delitem", (key,))

    def __format__(self, spec):
        text = self._wr_link.act(self, "op", "format", (spec,))
        if type(text) is not str:
            raise TypeError("__format__ must return a str")
        return text

    def __exit__(self, *exc):
        return self._wr_link.act(self, "op", "exit", (None, None, None))

    @property
    def __doc__(self):
        return self._wr_link.act(self, "getattr", "__doc__")

    @property
    def __module__(self):
        return self._wr_link.act(self, "getattr", "__module__")


def _unary(name):
    def method(self):
        return self._wr_link.act(self, "op", name)
    method.__name__ = "__%s__" % name
    return method


def _binary(name, reflected=False):
    def method(self, other):
        if type(other) is not Remote or other._wr_link is not self._wr_link:
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return a._wr_link.act(a, "op", name, (b,))
    method.__name__ = "__%s%s__" % ("r" if reflected else "", name)
    return method


for _name in ("len", "iter", "next", "bool", "float", "int", "index", "complex", "abs", "neg",
              "pos", "invert", "enter"):
    setattr(Remote, "__%s__" % _name, _unary(_name))
for _name in BINARY:
    setattr(Remote, "__%s__" % _name, _binary(_name))
    if _name not in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(Remote, "__r%s__" % _name, _binary(_name, True))
del _name


def _remote_type_name(value):
    """The type name a message shows: a Remote's is the type of the object it stands for."""
    if type(value) is Remote:
        return object.__getattribute__(value, "_wr_type")
    return type(value).__name__


class Link:
    """One side's end: what it handed over (numbered), the other side's objects (as Remote),
    and the loop that sends a message and serves the other side's calls until the answer."""

    def __init__(self, codec, transport, actions, capture, student_file="solution.py"):
        self.codec, self.transport, self.actions, self.capture = codec, transport, actions, capture
        self.student_file = student_file
        self.student_lines = []
        self.objects = {}  # n -> an object of this side, handed over
        self.numbers = {}  # id(object) -> n
        self.remotes = {}  # n -> the Remote for the other side's object n
        self.stand_ins = {}
        self.json = __import__("json")

    # -- values --------------------------------------------------------------------------------
    def export(self, obj):
        if type(obj) is Remote and obj._wr_link is self:
            return {"$remote": obj._wr_n}
        n = self.numbers.get(id(obj))
        if n is None:
            n = len(self.objects) + 1
            self.objects[n], self.numbers[id(obj)] = obj, n
        name = getattr(type(obj), "__name__", "object")
        return {"$handle": [n, name if type(name) is str else "object"]}

    def resolve(self, tag):
        if "$remote" in tag:
            n = tag["$remote"]
            if n not in self.objects:
                raise self.codec.PlainDataError("no object %r was handed over" % (n,))
            return self.objects[n]
        body = tag["$handle"]
        n, type_name = (body, "object") if type(body) is int else (body[0], body[1])
        remote = self.remotes.get(n)
        if remote is None:
            remote = self.remotes[n] = Remote(self, n, type_name)
        return remote

    def encode(self, value):
        return self.codec.to_tagged(value, handle=self.export, max_bytes=VALUE_MAX_BYTES,
                                    max_items=VALUE_MAX_ITEMS)

    def decode(self, data):
        return self.codec.from_tagged(data, handle=self.resolve)

    # -- messages ------------------------------------------------------------------------------
    def send(self, msg):
        reply = self.json.loads(self.transport(self.json.dumps(msg).encode()))
        if reply.get("op") == "abort":  # the other side is gone (a limit): the host judges
            os._exit(0)
        return reply

    def request(self, msg):
        """Send ``msg`` and serve the other side's calls until the answer to it comes."""
        reply = self.send(msg)
        while reply.get("op") == "call":
            reply = self.send(self.serve(reply))
        return reply

    def act(self, remote, action, name=None, args=(), kwargs=None):
        """Use the other side's object ``remote``: the answer, or its exception raised here."""
        targs = list(args)
        msg = {"op": "call", "target": remote._wr_n, "action": action, "name": name,
               "args": self.encode(targs), "kwargs": self.encode(dict(kwargs or {}))}
        reply = self.request(msg)
        if reply.get("out"):
            sys.stdout.write(reply["out"])
        if reply.get("err"):
            sys.stderr.write(reply["err"])
        if reply.get("op") == "return":
            for key, data in (reply.get("args") or {}).items():
                i = int(key)
                if 0 <= i < len(targs):
                    sync(targs[i], self.decode(data))
            return self.decode(reply.get("value"))
        if reply.get("op") == "raise":
            raise self.exception(reply)
        raise RuntimeError("the check's link broke (%r)" % (reply.get("op"),))

    # -- serving the other side's calls --------------------------------------------------------
    def serve(self, msg):
        out = Capture() if self.capture else None
        err = Capture() if self.capture else None
        saved = sys.stdout, sys.stderr
        try:
            target = self.objects[msg["target"]]
            action = msg["action"]
            if action not in self.actions:
                raise TypeError("%s is not served here" % action)
            received = msg["args"]
            args = self.decode(received)
            kwargs = self.decode(msg["kwargs"])
            name = msg.get("name")
            if out is not None:
                sys.stdout, sys.stderr = out, err
            try:
                result = perform(target, action, name, args, kwargs)
            finally:
                sys.stdout, sys.stderr = saved
            reply = {"op": "return", "value": self.encode(result)}
            changed = {}
            for i, a in enumerate(args):  # mutable arguments changed in place go back
                if type(a) in (list, dict, set):
                    now = self.encode(a)
                    if now != received[i]:
                        changed[str(i)] = now
            if changed:
                reply["args"] = changed
        except BaseException as e:  # noqa: BLE001 - whatever it is, it crosses as data
            sys.stdout, sys.stderr = saved
            reply = self.describe(e)
        if out is not None:
            reply["out"], reply["err"] = out.text(), err.text()
        return reply

    def describe(self, e):
        """An exception as data: its type, builtin bases, message, args and the student's frames."""
        t = type(e)
        bases = [c.__name__ for c in t.__mro__ if getattr(c, "__module__", None) == "builtins"]
        try:
            message = str(e)
        except BaseException:  # noqa: BLE001
            message = "<unprintable %s>" % t.__name__
        try:
            args = self.codec.to_tagged(list(e.args)) if t.__module__ == "builtins" else None
        except BaseException:  # noqa: BLE001 - not plain: the message says it
            args = None
        frames = []
        tb = e.__traceback__
        while tb is not None and len(frames) < 1000:
            code = tb.tb_frame.f_code
            if code.co_filename == self.student_file:
                n, src = tb.tb_lineno, self.student_lines
                line = src[n - 1].strip() if type(n) is int and 0 < n <= len(src) else ""
                frames.append([code.co_filename, n, code.co_name, line])
            tb = tb.tb_next
        if len(frames) > MAX_FRAMES:
            frames = frames[:MAX_FRAMES // 2] + frames[-MAX_FRAMES // 2:]
        return {"op": "raise", "type": t.__name__, "bases": bases, "message": message[:4000],
                "args": args, "frames": frames}

    def exception(self, reply):
        """The exception a "raise" answer stands for: the builtin type of that name, or a
        stand-in class of that name under the nearest builtin base."""
        import builtins
        name = reply.get("type")
        name = name if type(name) is str and name.isidentifier() and len(name) <= 100 else "Exception"
        message = reply.get("message")
        message = message if type(message) is str else ""
        cls = getattr(builtins, name, None)
        exc = None
        if (isinstance(cls, type) and issubclass(cls, BaseException)
                and cls not in (KeyboardInterrupt, GeneratorExit)):
            try:
                args = self.codec.from_tagged(reply["args"]) if reply.get("args") is not None else [message]
                exc = cls(*args) if type(args) is list else cls(message)
            except Exception:  # noqa: BLE001 - not constructible from those: the message
                exc = cls(message)
        if exc is None:
            base = Exception
            for b in reply.get("bases") or ():
                c = getattr(builtins, b, None) if type(b) is str else None
                if (isinstance(c, type) and issubclass(c, Exception)):
                    base = c
                    break
            key = (name, base)
            cls = self.stand_ins.get(key)
            if cls is None:
                cls = self.stand_ins[key] = type(name, (base,), {"__module__": "solution"})
            try:
                exc = cls(message)
            except Exception:  # noqa: BLE001
                exc = Exception(message)
        frames = reply.get("frames")
        exc._wr_frames = frames if type(frames) is list else []
        return exc


def perform(target, action, name, args, kwargs):
    if action == "call":
        return target(*args, **kwargs)
    if type(name) is not str:
        raise TypeError("a name is needed")
    if action == "getattr":
        return getattr(target, name)
    if action == "setattr":
        setattr(target, name, args[0])
        return None
    if action == "delattr":
        delattr(target, name)
        return None
    if name in UNARY and not args:
        return UNARY[name](target)
    if name in WITH_ARG:
        return WITH_ARG[name](target, *args)
    if name in BINARY and len(args) == 1:
        return BINARY[name](target, args[0])
    raise TypeError("unknown operation %r" % name)


def sync(old, new):
    """Make ``old`` (an argument the test passed) hold ``new`` (what the student's side made of
    it), in place, recursing where both hold containers of the same type."""
    if type(old) is list and type(new) is list:
        for i in range(min(len(old), len(new))):
            if type(old[i]) in (list, dict, set) and type(old[i]) is type(new[i]):
                sync(old[i], new[i])
            else:
                old[i] = new[i]
        del old[len(new):]
        old.extend(new[len(old):])
    elif type(old) is dict and type(new) is dict:
        for k in [k for k in old if k not in new]:
            del old[k]
        for k, v in new.items():
            if k in old and type(old[k]) in (list, dict, set) and type(old[k]) is type(v):
                sync(old[k], v)
            else:
                old[k] = v
    elif type(old) is set and type(new) is set:
        old.intersection_update(new)
        old.update(new)


def read_payload():
    import json
    return json.loads(sys.stdin.read())  # consumed: the student's code finds stdin empty


# -- the student's side ----------------------------------------------------------------------
def student_main(codec, transport):
    payload = read_payload()
    source = payload["student"]
    filename = payload.get("student_file") or "solution.py"
    link = Link(codec, transport, STUDENT_ACTIONS, capture=True, student_file=filename)
    link.student_lines = source.splitlines()
    solution = type(sys)("solution")
    solution.__file__ = filename
    sys.modules["solution"] = sys.modules["student"] = solution
    try:
        import linecache
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    except Exception:  # noqa: BLE001
        pass
    ready = {"op": "ready"}
    try:
        exec(compile(source, filename, "exec"), vars(solution))
    except (SystemExit, EOFError):
        pass  # an exit, or input() with no input, at the top level: the tests use what was
        # defined before it (guard the program part with `if __name__ == "__main__":`)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001
        ready["error"] = link.describe(e)
    if "error" not in ready:
        names = {}
        for key, value in list(vars(solution).items()):
            if type(key) is not str or key.startswith("_") or type(value) is type(sys):
                continue
            try:
                names[key] = link.encode(value)
            except (TypeError, ValueError):
                names[key] = link.export(value)  # too big or a cycle: a handle then
        ready["names"] = names
    link.request(ready)  # serves the test's calls until the host says the test ended
    os._exit(0)


# -- the test's side -------------------------------------------------------------------------
def test_main(codec, judging, transport):
    payload = read_payload()
    tests_src = payload["tests"]
    tests_file = payload.get("tests_file") or "tests.py"
    student_file = payload.get("student_file") or "solution.py"
    test_name = payload.get("test")
    link = Link(codec, transport, ("call",), capture=False, student_file=student_file)
    record = {"passed": False, "message": ""}
    lines = {tests_file: tests_src.splitlines()}

    def describe(exc):
        """What a failure says: the exception, the test's frames and the student's."""
        head = type(exc).__name__
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001
            text = ""
        if len(text) > 2000:
            text = text[:1997] + "..."
        if type(exc) is AssertionError and text.startswith("assert "):
            return text
        head += ": " + text if text else ""
        shown = []
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == tests_file:
                src = lines[tests_file]
                line = src[tb.tb_lineno - 1].strip() if 0 < tb.tb_lineno <= len(src) else ""
                shown.append('  File "%s", line %d, in %s (the test)\n    %s'
                             % (tests_file, tb.tb_lineno, code.co_name, line))
            tb = tb.tb_next
        for frame in getattr(exc, "_wr_frames", None) or ():
            if (type(frame) is list and len(frame) == 4 and type(frame[1]) is int
                    and all(type(x) is str for x in (frame[0], frame[2], frame[3]))):
                shown.append('  File "%s", line %d, in %s (your code)\n    %s'
                             % (frame[0][:200], frame[1], frame[2][:200], frame[3][:300]))
        if len(shown) > 8:
            shown = shown[:3] + ["  ... (%d more)" % (len(shown) - 6)] + shown[-3:]
        if shown:
            return "Traceback (most recent call last):\n" + "\n".join(shown) + "\n" + head
        return head

    def finish():
        link.send({"op": "done", "passed": record["passed"] is True, "message": record["message"],
                   "explanation": record.get("explanation")})
        os._exit(0)

    def missing_function(exc):
        """The explanation of a test calling a name the code lacks (docs/explanations.md), or None."""
        name = getattr(exc, "name", None)
        if type(exc) is not NameError or type(name) is not str or name in ns:
            return None
        functions = [key for key, value in names.items()
                     if type(key) is str and _remote_type_name(value) == "function"]
        return judging.missing_function(name, tests_src, functions)

    try:
        code = judging.rewrite_asserts(tests_src, tests_file)
    except (SyntaxError, ValueError) as e:
        record["message"] = "the test file does not compile: %s (line %s)" % (
            getattr(e, "msg", e), getattr(e, "lineno", "?"))
        finish()
    hello = link.request({"op": "hello"})
    if hello.get("error") is not None:
        record["message"] = ("Your code raised an error before the tests could run:\n"
                             + describe(link.exception(hello["error"])))
        finish()
    names = link.decode(hello.get("names") or {})
    solution = type(sys)("solution")
    solution.__file__ = student_file
    sys.modules["solution"] = sys.modules["student"] = solution
    # the test's globals get a copy of the builtins taken before any of the student's names, and
    # only the student's public names that are not builtins: a student's ``abs``, ``len`` or
    # ``isinstance`` never stands in for the one the test calls (``solution.abs`` reaches it)
    import builtins
    pristine = dict(vars(builtins))
    ns = {"__name__": "tests", "__file__": tests_file, "__builtins__": dict(pristine)}
    ns_builtins = ns["__builtins__"]
    for key, value in names.items() if type(names) is dict else ():
        if type(key) is str and not key.startswith("_"):
            setattr(solution, key, value)
            if key not in pristine:
                ns[key] = value

    def compare(left, op, right, source, msg=None):
        judging.assert_compare(left, op, right, source, msg, _remote_type_name)

    ns["__wr_compare"], ns["__wr_truth"] = compare, judging.assert_true
    try:
        exec(code, ns)
        if test_name:
            fn = ns.get(test_name)
            if not callable(fn):
                raise LookupError("no test named %s" % test_name)
            fn()
    except SystemExit:
        record["message"] = "The code called sys.exit() during the test."
    except BaseException as exc:  # noqa: BLE001
        record["message"] = describe(exc)
        with contextlib.suppress(Exception):
            record["explanation"] = missing_function(exc)
    else:
        record["passed"] = True
    intact = (ns.get("__wr_compare") is compare and ns.get("__wr_truth") is judging.assert_true
              and ns.get("__builtins__") is ns_builtins and len(ns_builtins) == len(pristine)
              and all(ns_builtins.get(key, pristine) is value for key, value in pristine.items()))
    if not intact:
        record["passed"] = False
        record["message"] = "The test's helpers or builtins were replaced while it ran."
    finish()


def main(role, codec, judging=None, transport=None):
    transport = transport or fd_transport()
    if role == "student":
        student_main(codec, transport)
    else:
        test_main(codec, judging, transport)
