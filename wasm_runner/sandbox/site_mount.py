"""A run's packages beyond the image: the folder it sees at ``/wasm-runner`` and the loader that
puts ``/wasm-runner/site`` first on ``sys.path``.

A run that asks for packages (``Sandbox.run(packages=...)``: unpacked, compiled package folders,
``wasm_runner.packages``) gets, in place of the wrapper's folder, a view of it: the wrapper's
files and ``site/`` holding the packages given, all hard links into the cache (built once per
set of package folders, shared by every run given the same set, read-only to the guest; the
caller keeps the number of sets bounded: ``packages.PackageStore.mounted``).
The preopen at ``/wasm-runner`` is the one every instance has, so no image's fd layout changes:
a fresh instance starts on the view, a warm slot (or an image's instance) is pointed at it at
hand-over (``GuestIO.rebind``), like ``/data``.

The wrapper runs one program per job and knows nothing of packages: the run hands it a loader
in place of the user's code (like ``host_functions.program``). Its first line, compiled under
the wrapper's own file name (its frames are left out of tracebacks), puts ``SITE`` on
``sys.path`` and runs the user's code compiled under its own file name; its second (only when
the last expression's value is shown) evaluates the user's last expression.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..cache import cache_dir

__all__ = ["SITE", "WRAPPER_FILE", "loader", "view_folder"]

SITE = "/wasm-runner/site"
WRAPPER_FILE = "<wasm-runner>"

# runs in the guest, in a namespace of its own; frame 1 is the loader's, in the job's namespace
_SETUP = """\
import sys
site, code, filename, show_last = _wr_args
if site not in sys.path:
    sys.path.insert(0, site)
namespace = sys._getframe(1).f_globals
from _wasm_runner_guest import program
program.prepare(filename, code)
body, tail = program.compile_program(code, filename, show_last)
pending = type(sys)('_wr_site')
pending.last = lambda: None if tail is None else eval(tail, namespace)
sys.modules['_wr_site'] = pending
exec(body, namespace)
"""


def loader(code: str, filename: str | None, display: bool | str) -> str:
    """The program the wrapper runs (under ``WRAPPER_FILE``) in place of ``code``: ``SITE`` on
    ``sys.path``, then ``code`` as the wrapper would run it."""
    args = (SITE, code, filename or "<string>", display is True)
    lines = [f"exec(compile({_SETUP!r}, {WRAPPER_FILE!r}, 'exec'), "
             f"{{'__builtins__': __builtins__, '_wr_args': {args!r}}})"]
    if display is True:
        lines.append("__import__('sys').modules.pop('_wr_site').last()")
    return "\n".join(lines) + "\n"


def _link_tree(source: Path, dest: Path) -> None:
    """Hard-link every file under ``source`` into ``dest`` (merged with what is there already)."""
    for folder, _dirs, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            target = dest / rel / name
            if not target.exists():
                os.link(Path(folder) / name, target)


def view_folder(boot: Path, packages: Sequence[Path]) -> Path:
    """The folder a run with ``packages`` sees at ``/wasm-runner``: ``boot``'s files and
    ``site/`` with every package folder merged in (hard links; made once per set, cached)."""
    boot_files = sorted(e for e in boot.iterdir() if e.is_file() and not e.is_symlink())
    # keyed by the files (not the folder's path): an image's empty wrapper folder is per sandbox
    names = [f"{e.name}:{e.stat().st_ino}" for e in boot_files] + sorted(map(str, packages))
    key = hashlib.sha256("\n".join(names).encode()).hexdigest()[:24]
    views = cache_dir() / "package-views"
    views.mkdir(mode=0o700, exist_ok=True)
    target = views / key
    if (target / ".complete").is_file():  # made whole in a staging folder, then renamed: never half-made
        return target
    stage = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=views))
    try:
        for entry in boot_files:
            os.link(entry, stage / entry.name)
        for folder in packages:
            _link_tree(folder, stage / "site")
        (stage / ".complete").touch()
        try:
            os.rename(stage, target)
        except OSError:  # made meanwhile by another run
            shutil.rmtree(stage, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target
