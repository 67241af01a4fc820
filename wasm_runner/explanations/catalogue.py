"""The message catalogues (``locale/<lang>.po``) and rendering an explanation with them."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["DEFAULT_LANGUAGE", "FIELDS", "LANGUAGES", "LANG_DESCRIPTION", "LANG_PATTERN", "UNIT", "catalogue", "fill", "formatted", "language_of",
           "parse_po", "render", "rendered_result"]

DEFAULT_LANGUAGE = "en"
LANGUAGES = ("en", "de")  # a language is its .po file in locale/ and its code here
FIELDS = ("title", "text", "hint")
# what an API's ``lang`` may be (a BCP 47 tag, or its underscore form), and what it says of it
LANG_PATTERN = r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$"
LANG_DESCRIPTION = (
    "The language of the result's explanation (a BCP 47 tag such as de or de-AT): explanations are "
    f"written in {', '.join(LANGUAGES)}; any other language gets English (docs/explanations.md)."
)
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_]+)(?::([a-z]+))?\}")
UNIT = "unit."  # catalogue entries that word a quantity (``unit.seconds``: "{n} seconds"), not ids
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def parse_po(text: str) -> dict[str, str]:
    """msgid -> msgstr of a .po file (comments, the header entry and empty translations left out)."""
    entries: dict[str, str] = {}
    current: dict[str, str] = {}
    field = ""

    def unquote(s: str) -> str:
        s = s.strip()
        if len(s) < 2 or s[0] != '"' or s[-1] != '"':
            raise ValueError(f"not a quoted .po string: {s!r}")
        return re.sub(r'\\(.)', lambda m: _ESCAPES.get(m.group(1), m.group(1)), s[1:-1])

    def close() -> None:
        if current.get("msgid") and current.get("msgstr"):
            entries[current["msgid"]] = current["msgstr"]
        current.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("msgid "):
            close()
            field, current["msgid"] = "msgid", unquote(line[6:])
        elif line.startswith("msgstr "):
            field, current["msgstr"] = "msgstr", unquote(line[7:])
        elif line.startswith('"') and field:
            current[field] = current.get(field, "") + unquote(line)
        else:
            raise ValueError(f"a .po line this reader does not know: {raw!r}")
    close()
    return entries


@cache
def catalogue(lang: str) -> dict[str, str]:
    """The catalogue of ``lang`` (one of ``LANGUAGES``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"no explanations in {lang!r}; there are: {', '.join(LANGUAGES)}")
    return parse_po((files(__package__) / "locale" / f"{lang}.po").read_text(encoding="utf-8"))


def language_of(asked: str | None) -> str:
    """The catalogue's language for an asked one (``de-AT``: ``de``); English when there is none."""
    if not asked:
        return DEFAULT_LANGUAGE
    base = asked.strip().lower().replace("_", "-").split("-")[0]
    return base if base in LANGUAGES else DEFAULT_LANGUAGE


def _number(value: Any) -> float | None:
    """A parameter as a number (limits come as whole numbers, or as text such as "0.5")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _num(x: float) -> str:
    """``5.0`` -> ``5``, ``0.5`` -> ``0.5``: numbers as the run's end line writes them (tiers.py)."""
    return str(int(x)) if x == int(x) else repr(x)


def formatted(kind: str, value: Any, words: dict[str, str]) -> str:
    """``value`` as a quantity of ``kind`` ("seconds", "bytes", "mb"), by the rule the run's end
    line follows (``wasm_runner/tiers.py``: 2 minutes, 1 second, 1 MB, 64 KB, 10 bytes), worded
    by ``words`` (a catalogue's ``unit.*`` entries). Another kind, no number or no wording: as it is.
    The page's renderer (web/src/explain.js) follows the same rule."""
    n = _number(value)
    if n is None or n != n or n in (float("inf"), float("-inf")) or kind not in ("seconds", "bytes", "mb"):
        return "" if value is None else str(value)
    if kind == "seconds":
        unit, n = ("minutes", n / 60) if n >= 120 and n % 60 == 0 else ("second" if n == 1 else "seconds", n)
    elif kind == "bytes":
        unit = "byte" if n == 1 else "bytes"
        for name, size in (("mb", 1 << 20), ("kb", 1 << 10)):
            if n >= size and n % size == 0:
                unit, n = name, n / size
                break
    else:
        unit = "mb"
    wording = words.get(UNIT + unit)
    return str(value) if wording is None else fill(wording, {"n": _num(n)})


def fill(template: str, params: dict[str, Any], words: dict[str, str] | None = None) -> str:
    """``template`` with ``{name}`` replaced by the parameter (missing: empty), ``{name:kind}``
    by the parameter as a quantity (``formatted``, in ``words``; missing: the ``unit.no_<kind>``
    wording, "the time limit") and ``{{``, ``}}`` by braces.
    The browser's renderer (web/src/explain.js) follows the same rule."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        value = params.get(m.group(1))
        if m.group(2) and value is None:  # a limit without a value: "the time limit", as the end line says
            return (words or {}).get(f"{UNIT}no_{m.group(2)}", "")
        if m.group(2):
            return formatted(m.group(2), value, words or {})
        return "" if value is None else str(value)

    return _PLACEHOLDER.sub(one, template)


def render(raw: dict[str, Any], lang: str | None = None) -> dict[str, Any]:
    """A checked explanation (``validate.checked``) with its title, text and hint in ``lang``:
    ``{id, title, text, hint, span, params, lang}``. A field a catalogue lacks comes from English."""
    code = language_of(lang)
    ours, english = catalogue(code), catalogue(DEFAULT_LANGUAGE)
    out: dict[str, Any] = {"id": raw["id"]}
    words = {**english, **ours}
    for part in FIELDS:
        key = f"{raw['id']}.{part}"
        out[part] = fill(ours.get(key) or english.get(key, ""), raw.get("params") or {}, words)
    out["span"] = raw.get("span")
    out["params"] = dict(raw.get("params") or {})
    out["lang"] = code
    return out


def rendered_result(body: dict[str, Any], lang: str | None) -> dict[str, Any]:
    """A result object (``Result.to_dict()``) with its explanation rendered in ``lang``."""
    explanation = body.get("explanation")
    if isinstance(explanation, dict) and explanation.get("id"):
        body["explanation"] = render(explanation, lang)
    return body
