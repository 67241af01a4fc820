# wasm-runner's exercise harness: runs ONE teacher test (a test_* function, or a test file's
# top level) against the student's code, inside the sandbox, on either tier. The host sends the
# program below (wrapped by ``wasm_runner.exercises.harness_program``) and, on stdin, a JSON
# payload: {"nonce", "channel" ("file": write /out/<nonce>.json; "output": the browser
# worker's rich-output channel), "student", "student_file", "tests", "tests_file", "test"}.
#
# Order matters: the harness reads the payload and takes every reference it needs BEFORE the
# student's code runs; it installs an audit hook that keeps the student's code away from frames,
# the garbage collector's object lists, tracing and further audit hooks; it restores the modules
# the student may have patched before running the test; and it reports once, at the end, with the
# per-run nonce the student never saw. A run that ends any other way (sys.exit, os._exit, a limit)
# leaves no report, and the host counts that as a failure. What this does and does not stop is in
# docs/exercises.md. The harness defines no classes and keeps no state in globals: only the
# frame of ``_wr_check`` holds the nonce.


def _wr_check():
    import ast
    import builtins
    import os
    import sys

    payload_text = sys.stdin.read()  # consumed: the student's code finds stdin empty
    decode = __import__("json").loads
    payload = decode(payload_text)
    del payload_text
    nonce = str(payload["nonce"])
    channel = payload.get("channel", "file")
    student_src = payload["student"]
    student_file = payload.get("student_file") or "solution.py"
    tests_src = payload["tests"]
    tests_file = payload.get("tests_file") or "tests.py"
    test_name = payload.get("test")
    result_path = "/out/%s.json" % nonce

    # -- references taken before the student's code can touch anything ------------------------
    pristine = dict(vars(builtins))
    _type, _len, _repr, _str, _isinstance = type, len, repr, str, isinstance
    _BaseException, _AssertionError, _SystemExit = BaseException, AssertionError, SystemExit
    _KeyboardInterrupt, _RecursionError, _MemoryError = KeyboardInterrupt, RecursionError, MemoryError
    _NameError = NameError
    posix = __import__("posix")  # the C functions: the wrapper's os.write/os._exit are Python
    os_open, os_write, os_close, os_exit = posix.open, posix.write, posix.close, posix._exit
    o_flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    ModuleType = _type(sys)
    modules = sys.modules
    host = None
    if channel == "output":
        import _wasm_runner_host as host  # the browser worker's channel (Pyodide only)
    gc = __import__("gc")
    gc_callbacks, gc_disable, gc_enable = gc.callbacks, gc.disable, gc.enable
    lines = {student_file: student_src.splitlines(), tests_file: tests_src.splitlines()}

    # modules the tests import, loaded now so the student's code cannot pre-empt them
    try:
        tree = ast.parse(tests_src, tests_file)
    except SyntaxError as e:
        tree = None
        setup_error = "the test file does not compile: %s (line %s)" % (e.msg, e.lineno)
    else:
        setup_error = None
        for node in ast.walk(tree):
            names = []
            if _isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif _isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in ("solution", "student"):
                    continue
                try:
                    __import__(name)
                except _BaseException:
                    pass
    snapshot = {name: (mod, dict(vars(mod))) for name, mod in list(modules.items())
                if _isinstance(mod, ModuleType)}

    def restore_modules():
        """Undo what the student did to modules loaded before their code ran (by identity: a
        planted object's __eq__ is never asked)."""
        missing = restore_modules
        for name, (mod, saved) in snapshot.items():
            if modules.get(name) is not mod:
                modules[name] = mod
            d = vars(mod)
            if _len(d) != _len(saved):
                for key in [k for k in d if _type(k) is not _str or k not in saved]:
                    del d[key]
            for key, value in saved.items():
                if d.get(key, missing) is not value:
                    d[key] = value

    # -- the guard ----------------------------------------------------------------------------
    locked = [False]
    denied_events = frozenset((
        "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace",
        "sys.setprofile", "sys.addaudithook", "gc.get_objects", "gc.get_referrers",
        "gc.get_referents", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
        "sys.monitoring.set_events", "sys.monitoring.set_local_events", "sys.remote_exec",
        "cpython._PySys_ClearAuditHooks", "ctypes.dlopen", "ctypes.addressof",
    ))
    frame_reads = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
    own_attrs = frozenset(("__code__", "__defaults__", "__kwdefaults__", "__globals__"))
    protected = []  # the harness's functions that reach the tests (set below)

    def guard(event, args, locked=locked, denied_events=denied_events, frame_reads=frame_reads,
              own_attrs=own_attrs, protected=protected, RuntimeError=RuntimeError):
        if not locked[0]:
            return
        if event in denied_events:
            raise RuntimeError("%s is not available while an exercise is checked" % event)
        if event == "object.__getattr__" or event == "object.__setattr__":
            name = args[1]
            if name in frame_reads and event == "object.__getattr__":
                raise RuntimeError("reading %s is not available while an exercise is checked" % name)
            if name in own_attrs:
                target = args[0]
                for f in protected:
                    if f is target:
                        raise RuntimeError("the checker's own functions are off limits")

    sys.addaudithook(guard)

    # -- comparisons the student's objects cannot bend ----------------------------------------
    # These functions reach the tests' namespace, so they use no globals and no closures: every
    # name they need is a default argument (reading __defaults__ is refused while locked), and
    # they are re-made with empty globals before the student's code runs.
    PLAIN = (int, float, complex, bool, str, bytes, type(None), list, tuple, dict, set, frozenset)
    NUMBERS = (int, float, complex, bool)
    SETS = (set, frozenset)

    def strict_eq(a, b, PLAIN=PLAIN, NUMBERS=NUMBERS, SETS=SETS, type=type, len=len, zip=zip):
        """(equal, why-not): ``==`` where a value of a builtin type only equals a value of a
        builtin type (an object whose __eq__ always says True fails), element by element."""
        stack = [(a, b)]
        while stack:
            x, y = stack.pop()
            tx, ty = type(x), type(y)
            if tx not in PLAIN and ty not in PLAIN:
                if not (x == y):
                    return False, None
                continue
            if tx not in PLAIN or ty not in PLAIN:
                return False, "type: got %s, expected %s" % (tx.__name__, ty.__name__)
            if tx in NUMBERS and ty in NUMBERS:
                if not (x == y):
                    return False, None
                continue
            if tx is not ty and not (tx in SETS and ty in SETS):
                return False, "type: got %s, expected %s" % (tx.__name__, ty.__name__)
            if tx is list or tx is tuple:
                if len(x) != len(y):
                    return False, None
                stack.extend(zip(x, y))
            elif tx is dict:
                if len(x) != len(y):
                    return False, None
                for k in x:
                    if k not in y:
                        return False, None
                    stack.append((x[k], y[k]))
            elif not (x == y):
                return False, None
        return True, None

    def short(value, repr=repr, str=str, type=type, len=len, BaseException=BaseException):
        try:
            text = repr(value)
        except BaseException as e:  # noqa: BLE001 - a student's __repr__ may raise anything
            text = "<unprintable %s>" % type(e).__name__
        if type(text) is not str:
            text = "<unprintable>"
        return text if len(text) <= 300 else text[:297] + "..."

    OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
           "is": lambda a, b: a is b, "is not": lambda a, b: a is not b}

    def wr_compare(left, op, right, source, msg=None, strict_eq=strict_eq, short=short, OPS=OPS,
                   AssertionError=AssertionError, bool=bool, str=str):
        """A rewritten ``assert left <op> right``: compares once, explains a failure."""
        why = None
        if op == "==":
            ok, why = strict_eq(left, right)
        elif op == "!=":
            ok = not strict_eq(left, right)[0]
        else:
            ok = bool(OPS[op](left, right))
        if ok:
            return
        text = "assert " + source
        if msg is not None:
            text += " (" + str(msg) + ")"
        if op == "==":
            text += "\n  got:      %s\n  expected: %s" % (short(left), short(right))
        else:
            text += "\n  left:  %s\n  right: %s" % (short(left), short(right))
        if why:
            text += "\n  (%s)" % why
        raise AssertionError(text)

    def wr_truth(value, source, msg=None, AssertionError=AssertionError, bool=bool, str=str):
        if bool(value):
            return
        raise AssertionError("assert " + source + ("" if msg is None else " (" + str(msg) + ")"))

    FunctionType = _type(_wr_check)

    def isolate(f, **deps):
        d = dict(zip(f.__code__.co_varnames[f.__code__.co_argcount - _len(f.__defaults__):
                                            f.__code__.co_argcount], f.__defaults__))
        d.update(deps)
        defaults = tuple(d[n] for n in f.__code__.co_varnames[
            f.__code__.co_argcount - _len(f.__defaults__):f.__code__.co_argcount])
        return FunctionType(f.__code__, {"__builtins__": {}}, f.__name__, defaults)

    strict_eq = isolate(strict_eq)
    short = isolate(short)
    wr_compare = isolate(wr_compare, strict_eq=strict_eq, short=short)
    wr_truth = isolate(wr_truth)
    protected.extend((strict_eq, short, wr_compare, wr_truth))

    OPNAMES = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
               ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}

    def rewrite(stmt):
        """``assert`` → a call of the harness's comparison (values and source in the message)."""
        test = stmt.test
        source = ast.get_source_segment(tests_src, test) or ast.unparse(test)
        source = " ".join(source.split())
        msg = stmt.msg if stmt.msg is not None else ast.Constant(None)
        if (_isinstance(test, ast.Compare) and _len(test.ops) == 1
                and _type(test.ops[0]) in OPNAMES):
            call = ast.Call(ast.Name("__wr_compare", ast.Load()),
                            [test.left, ast.Constant(OPNAMES[_type(test.ops[0])]),
                             test.comparators[0], ast.Constant(source), msg], [])
        else:
            call = ast.Call(ast.Name("__wr_truth", ast.Load()),
                            [test, ast.Constant(source), msg], [])
        return ast.copy_location(ast.Expr(call), stmt)

    def rewrite_all(node):
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if not _isinstance(block, list):
                continue
            for i, child in enumerate(block):
                if _isinstance(child, ast.Assert):
                    block[i] = rewrite(child)
                elif _isinstance(child, ast.AST):
                    rewrite_all(child)

    # -- reporting ----------------------------------------------------------------------------
    def encode(value):
        """JSON for str/int/bool/None/list/dict, by hand (the json module is the student's too)."""
        t = _type(value)
        if value is None:
            return "null"
        if t is bool:
            return "true" if value else "false"
        if t is int:
            return _str(value)
        if t is _str:
            out = ['"']
            for ch in value:
                o = ord(ch)
                if ch == '"' or ch == "\\":
                    out.append("\\" + ch)
                elif o < 0x20 or 0xD800 <= o <= 0xDFFF:
                    out.append("\\u%04x" % o)
                else:
                    out.append(ch)
            out.append('"')
            return "".join(out)
        if t is list:
            return "[" + ",".join([encode(v) for v in value]) + "]"
        if t is dict:
            return "{" + ",".join([encode(k) + ":" + encode(v) for k, v in value.items()]) + "}"
        return encode(_str(value))

    def report(record):
        locked[0] = True
        gc_disable()
        del gc_callbacks[:]
        restore_modules()
        record["nonce"] = nonce
        data = encode(record)
        if channel == "output":
            host.emit_output("check", "application/vnd.wasm-runner.check+json", data)
            return
        fd = os_open(result_path, o_flags, 0o600)
        os_write(fd, data.encode("utf-8"))
        os_close(fd)
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except _BaseException:
                pass
        os_exit(0)  # nothing of the student's runs after the report (atexit, __del__, ...)

    def describe(exc):
        """What a failure says: the exception, and the student's frames of its traceback."""
        name, text = "Exception", ""
        try:
            name = _str(_type(exc).__name__)
            text = _str(exc)
        except _BaseException:
            pass
        if _len(text) > 2000:
            text = text[:1997] + "..."
        head = name + (": " + text if text else "")
        if _type(exc) is _AssertionError and text.startswith("assert "):
            return text
        frames = []
        gc_disable()  # no collection (and no student __del__) while the guard is open
        locked[0] = False  # walking the traceback reads tb_frame; no student code runs here
        try:
            tb = exc.__traceback__
            while tb is not None and _len(frames) < 200:
                code = tb.tb_frame.f_code
                frames.append((code.co_filename, tb.tb_lineno, code.co_name))
                tb = tb.tb_next
        finally:
            locked[0] = True
            gc_enable()
        shown = []
        for filename, lineno, func in frames:
            if filename != student_file and filename != tests_file:
                continue
            where = "your code" if filename == student_file else "the test"
            src = lines.get(filename, [])
            line = src[lineno - 1].strip() if 0 < lineno <= _len(src) else ""
            shown.append('  File "%s", line %d, in %s (%s)\n    %s'
                         % (filename, lineno, func, where, line))
        if _len(shown) > 8:
            shown = shown[:3] + ["  ... (%d more)" % (_len(shown) - 6)] + shown[-3:]
        if shown:
            return "Traceback (most recent call last):\n" + "\n".join(shown) + "\n" + head
        return head

    # -- the run ------------------------------------------------------------------------------
    record = {"test": test_name, "passed": False, "message": "", "stage": "setup"}
    if setup_error:
        record["message"] = setup_error
        report(record)
        return
    rewrite_all(tree)
    ast.fix_missing_locations(tree)
    try:
        tests_code = compile(tree, tests_file, "exec")
    except (SyntaxError, ValueError) as e:
        record["message"] = "the test file does not compile: %s" % (e,)
        report(record)
        return
    solution = ModuleType("solution")
    solution.__file__ = student_file
    modules["solution"] = modules["student"] = solution
    ns = {"__name__": "tests", "__file__": tests_file, "__builtins__": dict(pristine)}
    ns_builtins = ns["__builtins__"]
    record["stage"] = "import"
    import_problem = None
    try:
        locked[0] = True
        try:
            exec(compile(student_src, student_file, "exec"), vars(solution))
        except (_SystemExit, EOFError):
            pass  # an exit, or input() with no input, at the top level: the tests use what
            # was defined before it (guard the program part with `if __name__ == "__main__":`)
        except _KeyboardInterrupt:
            raise
        except _BaseException as exc:  # noqa: BLE001
            import_problem = describe(exc)
        restore_modules()
        modules["solution"] = modules["student"] = solution
        if import_problem is not None:
            record["message"] = "Your code raised an error before the tests could run:\n" + import_problem
            report(record)
            return
        record["stage"] = "test"
        for key, value in list(vars(solution).items()):
            if _type(key) is _str and not key.startswith("_") and key not in pristine:
                ns[key] = value
        ns["__wr_compare"], ns["__wr_truth"] = wr_compare, wr_truth
        try:
            exec(tests_code, ns)
            if test_name:
                fn = ns.get(test_name)
                if not callable(fn):
                    raise LookupError("no test named %s" % test_name)
                fn()
        except _KeyboardInterrupt:
            raise
        except _SystemExit:
            record["message"] = "The code called sys.exit() during the test."
        except _BaseException as exc:  # noqa: BLE001
            record["message"] = describe(exc)
            if _type(exc) is _NameError:  # a function the tests call and the code lacks:
                missing = exc.name  # practice.py explains it (judging.missing_function)
                if _type(missing) is _str and missing not in ns:
                    record["missing_name"] = missing
                    record["functions"] = [key for key, value in list(vars(solution).items())[:1000]
                                           if _type(key) is _str and not key.startswith("_")
                                           and _type(value) is FunctionType][:100]
        else:
            record["passed"] = True
        intact = (ns.get("__wr_compare") is wr_compare and ns.get("__wr_truth") is wr_truth
                  and ns.get("__builtins__") is ns_builtins and _len(ns_builtins) == _len(pristine))
        if intact:
            for key, value in pristine.items():
                if ns_builtins.get(key, pristine) is not value:
                    intact = False
                    break
        if not intact:
            record["passed"] = False
            record["message"] = "The test's helpers or builtins were replaced while it ran."
        record["stage"] = "done"
        report(record)
    finally:
        locked[0] = False  # the browser's interpreter lives on: later runs are ordinary ones
        gc_enable()


_wr_check()
