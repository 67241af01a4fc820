# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# What went wrong, said so a beginner can act on it, for both tiers: an uncaught exception or a
# syntax error turned into a language-neutral explanation, {"id", "params", "span"}. Part of the
# guest package ``_wasm_runner_guest`` (guest/install.py): plain Python, standard library only,
# run inside the guest, after the traceback was printed.
#
# ``id`` names an entry of the message catalogues (wasm_runner/explanations/locale/*.po: its
# title, text and hint, in every language); ``params`` are the facts the entry's text needs, read
# from the exception, the program's source and the failing frame's own variables (the misspelt
# name and the close names in scope, a list's length, a dict's keys when few), never by running
# the program's code; ``span`` is the failing part of the line, from CPython's positions (line
# 1-based, col and end_col 0-based characters of that line, end_col exclusive). The host checks
# all of it: only known ids, short text params (explanations/validate.py).
import sys

MAX_TEXT = 80  # characters of one parameter
MAX_KEYS = 8  # a dict's keys are listed up to this many
SIZED = (list, tuple, str, dict, set, frozenset, bytes, bytearray, range)  # len() runs no program code
PLAIN = (str, int, float, bool, type(None))  # repr() runs no program code
BRACKETS = {"(": ")", "[": "]", "{": "}"}
# a line that starts with one of these starts a block, and ends with a colon
BLOCK_KEYWORDS = ("if", "elif", "else", "while", "for", "def", "class", "with", "try", "except", "finally")
# the type of a function or method that was named but not called (name.upper + '!')
CALLABLE_TYPES = ("builtin_function_or_method", "method", "function", "method-wrapper", "method_descriptor")
_TREES = {}  # the program's parsed source: one entry, parsed at most once per explanation


def explain(exc, filename, source):
    """The explanation of ``exc`` (raised by the program ``source``, compiled as ``filename``),
    or None (SystemExit, KeyboardInterrupt, or a failure here: never an error of its own)."""
    try:
        if isinstance(exc, (SystemExit, KeyboardInterrupt, GeneratorExit)):
            return None
        if isinstance(exc, SyntaxError):
            ident, params, span = syntax(exc, source)
        else:
            frame, span = failing_place(exc, filename, source)
            ident, params = runtime(exc, frame, span, source)
        return {"id": ident, "params": {k: short(v) for k, v in params.items()}, "span": span}
    except Exception:
        return None
    finally:
        _TREES.clear()


def short(value):
    """A parameter as the catalogues use it: an int, or text of at most MAX_TEXT characters."""
    if isinstance(value, bool) or not isinstance(value, int):
        value = str(value)
        if len(value) > MAX_TEXT:
            value = value[: MAX_TEXT - 1] + "\u2026"
    return value


def names_list(names):
    """Names as the catalogues show them: quoted, comma-separated."""
    return ", ".join("'%s'" % n for n in names)


# ---- where it failed ----------------------------------------------------------------------


def failing_place(exc, filename, source):
    """(frame, span) of the innermost traceback entry in the program's own file (else the
    innermost entry shown)."""
    tb, chosen = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            chosen = tb
        tb = tb.tb_next
    if chosen is None:
        return None, None
    code, lasti = chosen.tb_frame.f_code, chosen.tb_lasti
    line, end_line, col, end_col = chosen.tb_lineno, None, None, None
    try:
        for i, position in enumerate(code.co_positions()):
            if i == lasti // 2:
                line, end_line, col, end_col = position
                break
    except Exception:
        pass
    return chosen.tb_frame, span_of(source, line or chosen.tb_lineno, end_line, col, end_col)


def span_of(source, line, end_line, col, end_col):
    """A span in characters from CPython's UTF-8 byte columns; a span over several lines is cut
    at the end of its first line, a missing column covers the line's text."""
    lines = source.splitlines()
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    text = lines[line - 1]
    raw = text.encode("utf-8")
    if col is None:
        start = len(text) - len(text.lstrip())
        return {"line": line, "col": start, "end_col": len(text.rstrip()) or start}
    if end_line != line or end_col is None:
        end_col = len(raw.rstrip())
    start = len(raw[:col].decode("utf-8", "replace"))
    end = len(raw[:end_col].decode("utf-8", "replace"))
    return {"line": line, "col": start, "end_col": max(end, start)}


def parsed(source):
    """The program's syntax tree (None if it does not parse), parsed once for all the questions
    one explanation asks of it."""
    if source not in _TREES:
        import ast
        _TREES.clear()
        try:
            _TREES[source] = ast.parse(source)
        except Exception:
            _TREES[source] = None
    return _TREES[source]


def segment(source, node):
    """The program's own text of ``node`` (one line at most), or ''."""
    lines = source.splitlines()
    line = getattr(node, "lineno", None)
    if not isinstance(line, int) or not 1 <= line <= len(lines) or node.end_lineno != line:
        return ""
    raw = lines[line - 1].encode("utf-8")
    return raw[node.col_offset:node.end_col_offset].decode("utf-8", "replace")


def word_before(lines, line, span):
    """The span of the word before ``span`` on its line (the colon belongs right after it), or None."""
    if span is None or not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    before = lines[line - 1][:span["col"]].rstrip()
    if not before:
        return None
    start = max(before.rfind(" "), before.rfind("\t")) + 1
    return {"line": line, "col": start, "end_col": len(before)}


def indentation_span(source, line):
    """The span of line ``line``'s indentation (its leading spaces and tabs)."""
    lines = source.splitlines()
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    text = lines[line - 1]
    return {"line": line, "col": 0, "end_col": len(text) - len(text.lstrip(" \t\f"))}


def node_at(source, span):
    """The expression of ``source`` that starts at ``span`` and ends there (None if unknown)."""
    if span is None:
        return None
    import ast
    tree = parsed(source)
    if tree is None:
        return None
    line_bytes = source.splitlines()[span["line"] - 1]
    col = len(line_bytes[: span["col"]].encode("utf-8"))
    end = len(line_bytes[: span["end_col"]].encode("utf-8"))
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and getattr(node, "lineno", None) == span["line"] \
                and node.col_offset == col and node.end_col_offset == end:
            best = node
    return best


def variable(frame, name):
    """The value of the variable ``name`` as the failing frame sees it, and whether it has one
    (plain lookups: no code of the program runs; nor may what is done with the value: only
    built-in types are measured or shown)."""
    if frame is None:
        return False, None
    for scope in (frame.f_locals, frame.f_globals):
        try:
            if name in scope:
                return True, scope[name]
        except Exception:
            return False, None
    return False, None


# ---- syntax errors ------------------------------------------------------------------------


def syntax(exc, source):
    """(id, params, span) of a SyntaxError, IndentationError or TabError."""
    msg = str(getattr(exc, "msg", "") or "")
    lines = source.splitlines()
    line = exc.lineno if isinstance(exc.lineno, int) else None
    span = None
    if line is not None and 1 <= line <= len(lines):
        text = lines[line - 1]
        offset = exc.offset if isinstance(exc.offset, int) and exc.offset > 0 else None
        end_offset = getattr(exc, "end_offset", None)
        end_line = getattr(exc, "end_lineno", None)
        if offset is None:
            span = span_of(source, line, None, None, None)
        else:
            col = min(offset - 1, len(text))
            end = end_offset - 1 if isinstance(end_offset, int) and end_line == line and end_offset > offset else col + 1
            span = {"line": line, "col": col, "end_col": min(max(end, col), max(len(text), col))}
    params = {"line": line or 0}
    if isinstance(exc, TabError):
        return "tab_error", params, span
    if isinstance(exc, IndentationError):
        if msg.startswith("expected an indented block"):
            after = msg.partition("after ")[2]
            params["after"] = after or "':'"
            return "indent_expected", params, span
        if msg == "unexpected indent":
            return "indent_unexpected", params, indentation_span(source, line) or span
        if msg.startswith("unindent does not match"):
            return "indent_unmatched", params, indentation_span(source, line) or span
        return "indent_other", params, span
    if msg == "expected ':'":
        return "missing_colon", params, word_before(lines, line, span) or span
    if msg.startswith("Missing parentheses in call to 'print'"):
        return "print_statement", params, span
    if "Maybe you meant '==' or ':=' instead of '='" in msg:
        return "assign_in_condition", params, span
    if msg.endswith("was never closed"):
        params["bracket"] = msg[1:2]
        params["closing"] = BRACKETS.get(msg[1:2], "")
        return "unclosed_bracket", params, span
    if msg.startswith("unmatched "):
        params["bracket"] = msg[-2:-1]
        return "unmatched_bracket", params, span
    if msg.startswith("closing parenthesis") and "does not match opening parenthesis" in msg:
        quoted = [part for i, part in enumerate(msg.split("'")) if i % 2]
        params["closing"], params["bracket"] = (quoted + ["", ""])[:2]
        if "on line" in msg:
            params["opening_line"] = msg.rsplit("on line ", 1)[1]
        return "mismatched_bracket", params, span
    if msg.startswith("unterminated triple-quoted string"):
        return "unterminated_triple", params, span
    if msg.startswith("unterminated string literal") or msg.startswith("EOL while scanning"):
        return "unterminated_string", params, span
    if msg.startswith("invalid character"):
        params["char"] = msg.split("'")[1] if msg.count("'") >= 2 else ""
        return "invalid_character", params, span
    if msg.startswith("Perhaps you forgot a comma") or msg.endswith("Perhaps you forgot a comma?"):
        return "missing_comma", params, span
    if msg.startswith("leading zeros in decimal integer"):
        return "leading_zero", params, span
    if msg.startswith("invalid decimal literal"):
        return "invalid_decimal", params, span
    if msg.startswith("'return' outside function"):
        return "return_outside", params, span
    if msg.startswith("'break' outside loop") or msg.startswith("'continue' not properly in loop"):
        params["keyword"] = "break" if "break" in msg else "continue"
        return "loop_keyword_outside", params, span
    if msg.startswith("cannot assign to") or msg.startswith("cannot delete"):
        params["target"] = msg.split("cannot assign to ", 1)[-1].split(";")[0].split(" here")[0].split(".")[0]
        return "cannot_assign", params, span
    if msg.startswith("expected 'except' or 'finally'"):
        return "try_without_except", params, span
    if msg.startswith("f-string"):
        return "fstring", params, span
    if msg == "expected '('" and line is not None:
        words = lines[line - 1].replace(":", " ").replace("(", " ").split()
        if words[:1] == ["async"]:
            words = words[1:]
        if words[:1] == ["def"]:
            params["name"] = words[1] if len(words) > 1 and words[1].isidentifier() else ""
            return "def_parentheses", params, span
    if msg == "invalid syntax" and span is not None:
        text = lines[line - 1]
        word = text[span["col"]:].split()[:1]
        if word and word[0].rstrip(":") in ("else", "elif"):
            params["keyword"] = word[0].rstrip(":")
            return "else_without_if", params, span
        before = text[:span["col"]].rstrip()
        first = before.split()[:1]
        starts_word = text[span["col"]:span["col"] + 1].isidentifier() and text[span["col"] - 1:span["col"]].isspace()
        ends_block = text.split("#", 1)[0].rstrip().endswith(":")
        if first and first[0] in BLOCK_KEYWORDS and ":" not in before and len(before.split()) > 1 \
                and starts_word and not ends_block:
            # `while True print(1)`: the block's line goes on without its colon
            params["keyword"] = first[0]
            return "missing_colon", params, word_before(lines, line, span)
    params["message"] = msg
    return "syntax_other", params, span


# ---- exceptions ---------------------------------------------------------------------------


def distance(a, b, limit):
    """The edit distance of two names as CPython's "Did you mean" weighs it (a change of case
    costs 1, any other edit 2), or ``limit + 1`` once it is sure to be more than ``limit``."""
    if abs(len(a) - len(b)) * 2 > limit:
        return limit + 1
    previous = list(range(0, 2 * len(b) + 1, 2))
    for i, ca in enumerate(a, 1):
        current = [2 * i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else (1 if ca.lower() == cb.lower() else 2)
            current.append(min(previous[j] + 2, current[j - 1] + 2, previous[j - 1] + cost))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def close_names(name, candidates):
    """Up to 3 of ``candidates`` close to ``name`` (within CPython's "Did you mean" distance),
    closest first. Plain Python: importing difflib would cost more than the search."""
    limit = (len(name) + 3) * 2 // 6
    found = []
    for c in set(candidates):
        if isinstance(c, str) and c != name and not c.startswith("_"):
            d = distance(name, c, limit)
            if d <= limit:
                found.append((d, c))
    return [c for _, c in sorted(found)[:3]]


def names_in_scope(frame):
    import builtins
    names = set(vars(builtins))  # its dict: a __dir__ the program set is not called
    if frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            try:
                names.update(k for k in scope if isinstance(k, str))
            except Exception:
                pass
    return names


def type_name(value):
    return type(value).__name__


def plain_repr(value):
    """repr() of a built-in value; another is named by its type (its __repr__ is the program's)."""
    if type(value) in PLAIN:
        return repr(value)
    if type(value) is tuple and all(type(v) in PLAIN for v in value):
        return repr(value)
    return "<%s object>" % type_name(value)


def runtime(exc, frame, span, source):
    """(id, params) of an exception the program raised."""
    message = str(exc) if exc.args else ""
    kind = type(exc).__name__
    node = node_at(source, span)
    params = {"exception": kind, "message": message}
    if isinstance(exc, UnboundLocalError):
        name = message.split("'")[1] if message.count("'") >= 2 else ""
        params["name"] = name
        return "unbound_local", params
    if isinstance(exc, NameError):
        name = getattr(exc, "name", None) or (message.split("'")[1] if message.count("'") >= 2 else "")
        params["name"] = name
        if name in ("true", "false", "none", "null"):
            params["first"] = {"true": "True", "false": "False"}.get(name, "None")
            return "name_lowercase_constant", params
        close = close_names(name, names_in_scope(frame))
        if module_not_imported(name, source, span, close):
            params["module"] = name
            return "module_not_imported", params
        if close:
            params["close"] = names_list(close)
            params["first"] = close[0]
            return "name_misspelt", params
        return "name_undefined", params
    if isinstance(exc, RecursionError):
        return "recursion", params
    if isinstance(exc, ZeroDivisionError):
        return "zero_division", params
    if isinstance(exc, ModuleNotFoundError):
        name = getattr(exc, "name", None) or ""
        params["module"] = name
        params["tier"] = "browser" if sys.platform == "emscripten" else "server"
        close = close_module(name)
        if close:
            params["close"] = close
            return "module_misspelt", params
        return "module_not_found", params
    if isinstance(exc, ImportError):
        params["name"] = getattr(exc, "name", None) or ""
        return "import_error", params
    if isinstance(exc, (FileNotFoundError, PermissionError)) and isinstance(exc.filename, str):
        import os
        params["file"] = exc.filename
        try:
            params["folder"] = os.getcwd()
        except Exception:
            params["folder"] = ""
        outside = exc.filename.startswith("/") and not (
            params["folder"] and (exc.filename + "/").startswith(params["folder"].rstrip("/") + "/"))
        if outside:  # a path from the top of the file system: the sandbox shows only its folders
            params["base"] = exc.filename.rstrip("/").rsplit("/", 1)[-1] or "data.txt"
            return ("file_outside_write" if writes(node) else "file_outside"), params
    if isinstance(exc, FileNotFoundError):
        params.setdefault("file", "")
        params.setdefault("folder", "")
        return "file_not_found", params
    if isinstance(exc, EOFError):
        return "eof_input", params
    if isinstance(exc, IndexError):
        return index_error(exc, frame, node, params, source)
    if isinstance(exc, KeyError):
        return key_error(exc, frame, node, params)
    if isinstance(exc, AttributeError):
        return attribute_error(exc, frame, node, params)
    if isinstance(exc, TypeError):
        return type_error(message, frame, node, params, source)
    if isinstance(exc, ValueError):
        return value_error(message, params)
    if isinstance(exc, AssertionError):
        return "assertion", params
    if isinstance(exc, MemoryError):
        return "memory", params
    if isinstance(exc, OverflowError):
        return "overflow", params
    if isinstance(exc, PermissionError) or isinstance(exc, OSError):
        return "os_error", params
    return "exception_other", params


def index_error(exc, frame, node, params, source):
    import ast
    message = params["message"]
    if isinstance(node, ast.Subscript):
        if isinstance(node.value, ast.Name):
            params["name"] = node.value.id
            found, value = variable(frame, node.value.id)
            if found and type(value) in SIZED:
                params["length"] = len(value)
        elif isinstance(node.value, ast.Constant) and type(node.value.value) in (str, bytes):
            params["name"] = segment(source, node.value)  # 'cat'[5]: the literal, as written
            params["length"] = len(node.value.value)
        elif isinstance(node.value, (ast.List, ast.Tuple)) and not any(
                isinstance(e, ast.Starred) for e in node.value.elts):
            params["name"] = segment(source, node.value)
            params["length"] = len(node.value.elts)
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            params["index"] = node.slice.value
        elif isinstance(node.slice, ast.Name):
            found, value = variable(frame, node.slice.id)
            if found and isinstance(value, int) and not isinstance(value, bool):
                params["index"] = value
    if "length" in params and "index" in params:
        params["last"] = params["length"] - 1
        if params["length"] == 0:
            return "index_empty", params
        return "index_out_of_range", params
    if message.startswith("pop from empty"):
        return "index_empty", params
    return "index_other", params


def key_error(exc, frame, node, params):
    import ast
    key = exc.args[0] if exc.args else None
    params["key"] = plain_repr(key)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        params["name"] = node.value.id
        found, value = variable(frame, node.value.id)
        if found and type(value) is dict:
            keys = list(value)
            params["count"] = len(keys)
            if not keys:
                return "key_empty", params
            if len(keys) <= MAX_KEYS:
                params["keys"] = ", ".join(plain_repr(k) for k in keys)
                return "key_missing_few", params
    return "key_missing", params


def attribute_error(exc, frame, node, params):
    name = getattr(exc, "name", None)
    obj = getattr(exc, "obj", None)
    message = params["message"]
    if not isinstance(name, str):
        name = message.rsplit("'", 2)[-2] if message.count("'") >= 2 else ""
    params["name"] = name
    params["type"] = type_name(obj) if obj is not None else (message.split("'")[1] if message.count("'") >= 2 else "")
    if message.startswith("'NoneType' object"):
        return "none_attribute", params
    if obj is not None:
        try:  # object.__dir__: the names it has, without a __dir__ of the program's
            close = close_names(name, object.__dir__(obj))
        except Exception:
            close = []
        if close:
            params["close"] = names_list(close)
            params["first"] = close[0]
            return "attribute_misspelt", params
        if isinstance(obj, str) and name in ("append", "add", "push"):
            return "str_no_append", params
        if type(obj).__name__ == "module":
            params["type"] = getattr(obj, "__name__", "module")
            return "module_attribute", params
    return "attribute_missing", params


def operand_name(node, side):
    import ast
    operand = getattr(node, side, None)
    if isinstance(operand, ast.Name):
        return operand.id
    if isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name):
        return operand.func.id + "(...)"
    return ""


def type_error(message, frame, node, params, source):
    import ast
    if message.startswith('can only concatenate str (not "'):
        params["other"] = message.split('"')[1]
        if params["other"] in CALLABLE_TYPES and isinstance(node, ast.BinOp):
            return not_called(node, "right", params, source, frame)
        if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Name) \
                and isinstance(node.right, ast.Constant) and type(node.right.value) in (int, float):
            found, value = variable(frame, node.left.id)
            if found and type(value) is str:
                params["name"] = node.left.id  # text that holds a number, most often from input()
                params["text"] = repr(value)
                return "text_plus_number", params
        params["name"] = (operand_name(node, "right") if isinstance(node, ast.BinOp) else "") or "value"
        return "str_plus_other", params
    if message.startswith("unsupported operand type(s) for"):
        op = message.split("for ", 1)[1].split(":", 1)[0]
        types = [part for i, part in enumerate(message.split("'")) if i % 2]
        params["op"] = op
        params["left"], params["right"] = (types + ["", ""])[:2]
        if isinstance(node, ast.BinOp):
            for side in ("left", "right"):
                if params[side] in CALLABLE_TYPES:
                    return not_called(node, side, params, source, frame)
        if "str" in types[:2] and ("int" in types[:2] or "float" in types[:2]):
            text_side = "left" if params["left"] == "str" else "right"
            number_side = "right" if text_side == "left" else "left"
            params["text_name"] = (operand_name(node, text_side) if isinstance(node, ast.BinOp) else "") or "text"
            params["number_name"] = (operand_name(node, number_side) if isinstance(node, ast.BinOp) else "") or "number"
            return "number_and_text", params
        if "NoneType" in types[:2]:
            return "none_operand", params
        return "unsupported_operand", params
    if "not supported between instances of" in message:
        types = [part for i, part in enumerate(message.split("'")) if i % 2]
        params["op"] = types[0] if types else ""
        params["left"], params["right"] = (types[1:] + ["", ""])[:2]
        if set(types[1:3]) in ({"str", "int"}, {"str", "float"}):
            return "compare_text_number", params
        return "compare_types", params
    if message.endswith("object is not callable"):
        params["type"] = message.split("'")[1] if message.count("'") >= 2 else ""
        name = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
        params["name"] = name or params["type"]
        return "not_callable", params
    if message.startswith("'NoneType' object is not subscriptable") or message.startswith(
            "'NoneType' object is not iterable") or message.startswith("'NoneType' object cannot be interpreted"):
        return "none_value", params
    wrong = wrong_argument(message, node, source)
    if wrong is not None:
        function, given = wrong
        if given == "NoneType":  # len(f()) of a function without return
            return "none_value", params
        params["function"], params["type"] = function, given
        if function == "len":
            return "len_wrong_type", params
        return ("argument_text" if given == "str" else "argument_wrong_type"), params
    if message.endswith("object is not subscriptable"):
        params["type"] = message.split("'")[1]
        return "not_subscriptable", params
    if message.endswith("object is not iterable"):
        params["type"] = message.split("'")[1]
        return "not_iterable", params
    if "object does not support item assignment" in message:
        params["type"] = message.split("'")[1]
        if params["type"] in ("str", "tuple"):
            return "immutable", params
        return "no_item_assignment", params
    if "indices must be integers" in message:
        params["type"] = message.split(" ", 1)[0]
        params["given"] = message.rsplit(" ", 1)[-1].strip("'")
        return "index_type", params
    if "cannot be interpreted as an integer" in message:
        params["type"] = message.split("'")[1]
        return "float_as_int", params
    if "missing" in message and "required positional argument" in message:
        params["function"] = message.split("(", 1)[0]
        params["missing"] = ", ".join("'%s'" % a for a in message.split("'")[1::2])
        return "missing_argument", params
    if "positional argument" in message and ("were given" in message or "was given" in message):
        params["function"] = message.split("(", 1)[0]
        return "too_many_arguments", params
    if "got an unexpected keyword argument" in message:
        params["function"] = message.split("(", 1)[0]
        params["name"] = message.rsplit("'", 2)[-2]
        return "unexpected_keyword", params
    if "unhashable type" in message:
        params["type"] = message.rsplit("unhashable type: ", 1)[1].strip("')")
        return "unhashable", params
    if message.startswith("can't multiply sequence by non-int"):
        return "multiply_sequence", params
    return "type_other", params


def value_error(message, params):
    if message.startswith("invalid literal for int() with base") or message.startswith(
            "could not convert string to float"):
        params["text"] = message.split(": ", 1)[1] if ": " in message else ""
        params["function"] = "int" if message.startswith("invalid") else "float"
        if params["text"][1:-1].strip() == "" and params["text"][:1] in ("'", '"'):
            return "number_from_empty", params  # int(''): often input() read an empty line
        return ("int_from_text" if params["function"] == "int" else "float_from_text"), params
    if message.startswith("too many values to unpack") or message.startswith("not enough values to unpack"):
        numbers = [int(w) for w in message.replace(",", " ").replace(")", " ").split() if w.isdigit()]
        params["expected"] = numbers[0] if numbers else 0
        if len(numbers) > 1:
            params["got"] = numbers[1]
        return ("unpack_too_many" if message.startswith("too many") else "unpack_too_few"), params
    if message.endswith("not in list"):
        return "not_in_list", params
    if message.startswith("math domain error"):
        return "math_domain", params
    return "value_other", params


def close_module(name):
    """The importable top-level module whose name is closest to ``name`` (the standard library's,
    and those in the folders of sys.path), or None."""
    import os
    names = set(sys.stdlib_module_names)
    for folder in sys.path:
        try:
            entries = os.listdir(folder or ".")
        except Exception:
            continue
        for entry in entries:
            base = entry.split(".", 1)[0]
            if base.isidentifier() and not entry.endswith((".dist-info", ".egg-info", ".pth")):
                names.add(base)
    found = close_names(name, names)
    return found[0] if found else None


def module_not_imported(name, source, span, close):
    """Whether ``name`` (not defined) is a standard module the program uses without importing it:
    CPython's "Did you forget to import" (sys.stdlib_module_names), when the program uses it as
    a module (``random.randint``) or no name in scope is close to it."""
    if name.startswith("_") or name not in getattr(sys, "stdlib_module_names", ()):
        return False
    if not close:
        return True
    import ast
    tree = parsed(source)
    if tree is None or span is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name \
                and node.value.lineno == span["line"]:
            return True
    return False


def writes(node):
    """Whether the failing call ``node`` opens a file to write: open(..., 'w'/'a'/'x'/'+'), or
    a path's write_text, write_bytes, mkdir or touch."""
    import ast
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("write_text", "write_bytes", "mkdir", "touch"):
        return True
    mode = node.args[1] if len(node.args) > 1 else None
    for keyword in node.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def not_called(node, side, params, source, frame):
    """(id, params) of a function or method used in an operation without calling it
    (``name.upper + '!'``): its name as written; a module's function (``math.sqrt``) is a function."""
    import ast
    operand = getattr(node, side)
    params["name"] = segment(source, operand) or params.get(side) or "f"
    method = isinstance(operand, ast.Attribute)
    if method and isinstance(operand.value, ast.Name):
        found, value = variable(frame, operand.value.id)
        method = not (found and type(value) is type(sys))
    return ("method_not_called" if method else "function_not_called"), params


def wrong_argument(message, node, source):
    """(function, type of the value it got) of a built-in function given a value it cannot use
    (``len(5)``, ``round('3.7')``, ``abs('x')``, ``math.sqrt('4')``), or None."""
    import ast
    function = given = None
    if message.startswith("object of type '") and message.endswith("' has no len()"):
        function, given = "len", message.split("'")[1]
    elif message.startswith("type ") and message.endswith(" doesn't define __round__ method"):
        function, given = "round", message.split(" ")[1]
    elif message.startswith("bad operand type for ") and "(): '" in message:
        function, given = message[len("bad operand type for "):].split("(")[0], message.split("'")[1]
    elif message.startswith("must be real number, not "):
        given = message.rsplit(" ", 1)[-1]
    if given is None:
        return None
    if isinstance(node, ast.Call):
        function = segment(source, node.func) or function
    return (function, given) if function else None
