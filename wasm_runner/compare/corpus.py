"""The hostile corpus: one file per attack, each opening with a machine-readable header.

Header: leading comment lines ``# key: value`` up to the first line that is not a comment.

- ``id`` (defaults to the file's stem), ``category``, ``attack`` (one sentence)
- ``expect``: the safe outcome, one of
  ``ok`` (a benign program: it must finish ok, printing ``stdout`` when given),
  ``stopped`` (the tier itself must end it: a limit or an error, never ``ok``),
  ``failed`` (it must be reported as a failure, never ``ok``),
  ``harmless`` (any ending inside the deadline; the host probes decide)
- ``limit``: the limit expected to stop it (``cpu``, ``wall``, ``memory``, ``output``, ``disk``),
  informational
- ``stdout``: text a benign run's stdout must contain
- ``repeat-body``: repeat the body this many times (for huge sources kept small in the repo)

The body may name the probes' bait with ``@@NAME@@`` placeholders (see ``HostProbes.placeholders``);
``@@NUL@@`` becomes a NUL character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WasmRunnerError

__all__ = [
    "EXPECTATIONS", "LIMIT_NAMES", "CorpusError", "Program", "default_corpus_dir", "load_corpus",
    "parse_program",
]

EXPECTATIONS = ("ok", "stopped", "failed", "harmless")
LIMIT_NAMES = ("cpu", "wall", "memory", "output", "disk")
_HEADER_LINE = re.compile(r"^#\s*([a-z][a-z-]*)\s*:\s*(.*?)\s*$")
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")
_MAX_REPEAT = 1_000_000


class CorpusError(WasmRunnerError, ValueError):
    """A corpus file whose header is missing or wrong."""


@dataclass(frozen=True)
class Program:
    """One corpus entry."""

    id: str
    category: str
    attack: str
    expect: str
    body: str
    path: str = ""
    limit: str | None = None
    stdout: str | None = None
    repeat_body: int = 1
    header: dict[str, str] = field(default_factory=dict)

    @property
    def benign(self) -> bool:
        return self.expect == "ok"

    def render(self, placeholders: dict[str, str]) -> str:
        """The source to run: the body (repeated when asked), placeholders filled in."""
        values = dict(placeholders, NUL="\0")

        def fill(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in values:
                raise CorpusError(f"{self.id}: unknown placeholder @@{name}@@")
            return values[name]

        return _PLACEHOLDER.sub(fill, self.body) * self.repeat_body

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "attack": self.attack,
                "expect": self.expect, "limit": self.limit, "file": Path(self.path).name if self.path else ""}


def parse_program(text: str, name: str, path: str = "") -> Program:
    """Parse one corpus file's text; raise ``CorpusError`` with the file's name on a bad header."""
    header: dict[str, str] = {}
    lines = text.splitlines(keepends=True)
    body_start = 0
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            body_start = i
            break
        m = _HEADER_LINE.match(line.rstrip("\n"))
        if m:
            header[m.group(1)] = m.group(2)
        body_start = i + 1
    expect = header.get("expect")
    if expect not in EXPECTATIONS:
        raise CorpusError(f"{name}: header 'expect' must be one of {', '.join(EXPECTATIONS)}, got {expect!r}")
    limit = header.get("limit") or None
    if limit is not None and limit not in LIMIT_NAMES:
        raise CorpusError(f"{name}: header 'limit' must be one of {', '.join(LIMIT_NAMES)}, got {limit!r}")
    for key in ("category", "attack"):
        if not header.get(key):
            raise CorpusError(f"{name}: header '{key}' is missing")
    try:
        repeat = int(header.get("repeat-body", "1"))
    except ValueError as exc:
        raise CorpusError(f"{name}: header 'repeat-body' must be a whole number") from exc
    if not 1 <= repeat <= _MAX_REPEAT:
        raise CorpusError(f"{name}: header 'repeat-body' must be between 1 and {_MAX_REPEAT}")
    return Program(
        id=header.get("id", name),
        category=header["category"],
        attack=header["attack"],
        expect=expect,
        body="".join(lines[body_start:]),
        path=path,
        limit=limit,
        stdout=header.get("stdout"),
        repeat_body=repeat,
        header=header,
    )


def default_corpus_dir() -> Path:
    """The ``corpus/`` folder at the top of the source tree."""
    return Path(__file__).resolve().parents[2] / "corpus"


def load_corpus(directory: Path | None = None, only: list[str] | None = None) -> list[Program]:
    """Every ``*.py`` file in ``directory`` (sorted by id); ``only`` keeps ids or categories named."""
    directory = directory or default_corpus_dir()
    if not directory.is_dir():
        raise CorpusError(f"corpus folder not found: {directory}")
    programs = []
    for p in sorted(directory.glob("*.py")):
        programs.append(parse_program(p.read_text(encoding="utf-8"), p.stem, str(p)))
    ids = [p.id for p in programs]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise CorpusError(f"duplicate ids in corpus: {', '.join(sorted(dupes))}")
    if only:
        wanted = set(only)
        unknown = wanted - {p.id for p in programs} - {p.category for p in programs}
        if unknown:
            raise CorpusError(f"no corpus program or category named: {', '.join(sorted(unknown))}")
        programs = [p for p in programs if p.id in wanted or p.category in wanted]
    return sorted(programs, key=lambda p: (p.category != "benign", p.category, p.id))
