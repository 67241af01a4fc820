"""Images (pre-initialized modules of the default runtime) and recursion depth, on real sandboxes.

Every run is a fresh instance of its image: what the image's set-up imported is there, nothing
else of the snapshotting run is (files, names, open files, random state), and recursion through
C-level callables goes as deep as the recursion limit lets Python code go, ending as a clean
``RecursionError`` beyond it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from wasm_runner import Limits, Sandbox, Status

MEMO = "import functools\n@functools.cache\ndef g(n): return 0 if n == 0 else 1 + g(n - 1)\nprint(g(300))"

# Each defines depth(n): recursion n levels deep through a C-level callable.
PATTERNS = {
    "cache": "import functools\n@functools.cache\ndef depth(n): return 0 if n == 0 else 1 + depth(n - 1)",
    "lru_cache": "import functools\n@functools.lru_cache(maxsize=None)\ndef depth(n): return 0 if n == 0 else 1 + depth(n - 1)",
    "sorted_key": ("def depth(n):\n    if n == 0: return 0\n    got = []\n"
                   "    sorted([n], key=lambda x: got.append(depth(n - 1)))\n    return 1 + got[0]"),
    "map": "def depth(n): return 0 if n == 0 else 1 + sum(map(depth, [n - 1]))",
    "repr": ("class N:\n    def __init__(s, c): s.c = c\n    def __repr__(s): return 'N(' + repr(s.c) + ')'\n"
             "def depth(n):\n    x = None\n    for _ in range(n): x = N(x)\n    return repr(x).count('N(')"),
    "eq": ("class E:\n    def __init__(s, c): s.c = c\n    def __eq__(s, o): return s.c == o.c\n"
           "def depth(n):\n    a = b = None\n    for _ in range(n): a, b = E(a), E(b)\n    return n if a == b else -1"),
}
# how deep native CPython 3.15 gets with the default recursion limit (1000 Python frames): one
# frame a level, two for sorted(key=...) (the function and the key's lambda)
NATIVE_DEPTH = {"cache": 990, "lru_cache": 990, "sorted_key": 490, "map": 990, "repr": 990, "eq": 990}

DEPTH_PROBE = """
import sys
{src}
try:
    print(depth({n}))
except RecursionError as e:
    print("RecursionError", e)
"""


def test_memoized_recursion_prints_300(sandbox: Sandbox) -> None:
    r = sandbox.run(MEMO)
    assert r.ok and r.stdout == "300\n", (r.status, r.stderr[-500:])


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_recursion_through_c_callables_goes_as_deep_as_native(image_sandbox: Sandbox, pattern: str) -> None:
    n = NATIVE_DEPTH[pattern]
    r = image_sandbox.run(DEPTH_PROBE.format(src=PATTERNS[pattern], n=n), limits=Limits(cpu_seconds=10))
    assert r.ok and r.stdout.strip() == str(n), (pattern, r.status, r.stdout[-300:], r.stderr[-300:])


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_deeper_recursion_ends_as_a_clean_recursion_error(sandbox: Sandbox, pattern: str) -> None:
    # 20,000 levels: five times what the C-stack window holds (repr and eq build a structure
    # that deep first; see the next test for structures far deeper than that)
    code = "import sys\nsys.setrecursionlimit(10**6)\n" + DEPTH_PROBE.format(src=PATTERNS[pattern], n=20_000)
    r = sandbox.run(code, limits=Limits(cpu_seconds=20, wall_seconds=60))
    assert r.ok and r.stdout.startswith("RecursionError"), (pattern, r.status, r.message, r.stdout[-300:])
    assert sandbox.run("print('still here')").stdout == "still here\n"


def test_freeing_a_very_deep_structure_never_takes_the_host_down(sandbox: Sandbox) -> None:
    # 3.15 on wasm: freeing a chain of objects nests C calls that use no linear-memory stack, so
    # CPython's stack checks (and its trashcan, which asks them) do not see them: 50,000 levels
    # are freed, 400,000 overflow the native wasm stack, which ends the run as a crash, cleanly.
    # 3.12 (small) counts instead, and its trashcan frees any depth.
    chain = "class E:\n    def __init__(s, c): s.c = c\nx = None\nfor _ in range({n}): x = E(x)\ndel x\nprint('freed')"
    # the CPU limit bounds the work; the wall limit is roomy for a busy machine (10 s was not)
    roomy = Limits(cpu_seconds=20, wall_seconds=120)
    assert sandbox.run(chain.format(n=50_000), limits=roomy).stdout == "freed\n"
    r = sandbox.run(chain.format(n=400_000), limits=replace(roomy, memory_mb=512))
    if sandbox.runtime.python_version.startswith("3.12"):
        assert r.ok and r.stdout == "freed\n"
    else:
        assert r.status is Status.ERROR and r.limit == "stack" and "ran out of stack" in r.message
    assert sandbox.run("print('still here')").stdout == "still here\n"


def test_uncaught_deep_recursion_is_an_ordinary_error(sandbox: Sandbox) -> None:
    r = sandbox.run("import sys\nsys.setrecursionlimit(10**6)\n" + PATTERNS["cache"] + "\ndepth(200_000)",
                    limits=Limits(cpu_seconds=20, wall_seconds=60))
    assert r.status is Status.ERROR and r.exit_code == 1 and "RecursionError" in r.stderr


RANDOMS = "import random, numpy as np\nprint(random.random(), random.getrandbits(64), np.random.rand(), np.random.randint(1 << 30))"


def test_every_run_gets_its_own_random_seeds(image_sandbox: Sandbox) -> None:
    a = image_sandbox.run(RANDOMS)
    b = image_sandbox.run(RANDOMS)
    assert a.ok and b.ok, a.stderr
    ra, rb = a.stdout.split(), b.stdout.split()
    assert all(x != y for x, y in zip(ra, rb)), (ra, rb)


def test_a_session_keeps_its_seed_across_cells(image_sandbox: Sandbox) -> None:
    with image_sandbox.session() as s:
        assert s.run("import random; random.seed(7); a = random.random()").ok
        r = s.run("random.seed(7); print(a == random.random())")
        assert r.stdout == "True\n"


def test_nothing_of_the_snapshotting_run_is_visible(image_sandbox: Sandbox) -> None:
    code = """
names = sorted(k for k in globals() if not k.startswith('__'))
import os, sys, stat, json
fds = {}
for fd in range(3, 64):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    fds[fd] = stat.S_ISDIR(st.st_mode)
print(json.dumps({
    "main": names,
    "tmp": os.listdir('/tmp'), "scratch": os.listdir('/scratch'),
    "files": [fd for fd, is_dir in fds.items() if not is_dir],
    "cwd": os.getcwd(), "argv": sys.argv,
}))
"""
    r = image_sandbox.run(code)
    assert r.ok, r.stderr
    seen = json.loads(r.stdout)
    assert seen == {"main": [], "tmp": [], "scratch": [], "files": [],
                    "cwd": "/scratch", "argv": ["<string>"]}


def test_the_datascience_image_starts_with_its_packages(datascience_sandbox: Sandbox) -> None:
    r = datascience_sandbox.run("import sys\nprint(sorted(m for m in ('numpy', 'pandas', 'matplotlib.pyplot') if m in sys.modules))")
    assert r.stdout == "['matplotlib.pyplot', 'numpy', 'pandas']\n"
    code = ("import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
            "df = pd.DataFrame({'g': np.arange(10) % 3, 'v': np.arange(10.0)})\n"
            "print(df.groupby('g')['v'].sum().tolist(), plt.get_backend().lower())")
    r = datascience_sandbox.run(code)
    # the wrapper's backend: Agg drawing, and plt.show() puts the figures in outputs
    assert r.ok and r.stdout == "[18.0, 12.0, 15.0] module://wasm_runner_show\n", r.stderr
    shown = datascience_sandbox.run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    assert shown.ok and shown.stderr == "" and [o.mime for o in shown.outputs] == ["image/png"]


def test_a_plot_from_the_image_is_captured(datascience_sandbox: Sandbox) -> None:
    r = datascience_sandbox.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n_ = plt.title('x')", display=True)
    assert r.ok and [o.mime for o in r.outputs] == ["image/png"], (r.stderr, r.outputs)


def test_memory_mb_counts_what_a_run_adds_to_its_image(datascience_sandbox: Sandbox) -> None:
    # the image holds ~100 MB already; a 64 MB cap (the student profile's) still runs pandas
    small = Limits(memory_mb=64)
    assert datascience_sandbox.start_memory_bytes > small.memory_bytes
    code = ("import numpy as np, pandas as pd\n"
            "df = pd.DataFrame({'g': np.arange(1000) % 7, 'v': np.arange(1000.0)})\n"
            "print(df.groupby('g')['v'].mean().round(1).tolist()[:2])")
    r = datascience_sandbox.run(code, limits=small)
    assert r.ok and r.stdout == "[497.0, 498.0]\n", (r.status, r.stderr[-300:])
    # ... and a run that wants more than it may add ends as memory_limit
    r = datascience_sandbox.run("import numpy as np\nx = np.ones(20_000_000)\nprint(x.sum())", limits=small)
    assert r.status is Status.MEMORY_LIMIT and r.limit == "memory"
    assert datascience_sandbox.run("print('ok')", limits=small).stdout == "ok\n"


def test_files_in_and_out_and_data_dir_work_with_the_image(datascience_sandbox: Sandbox, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.csv").write_text("a,b\n1,2\n3,4\n")
    code = ("import pandas as pd\ndf = pd.read_csv('/data/in.csv')\n"
            "df.to_csv('/out/sum.csv', index=False)\nprint(df['a'].sum(), open('mine.txt').read())")
    r = datascience_sandbox.run(code, data_dir=data, collect_out=True, files={"mine.txt": b"hello"})
    assert r.ok and r.stdout == "4 hello\n", r.stderr
    assert [f.path for f in r.files] == ["/out/sum.csv"]
    # a run without a data folder sees none
    r = datascience_sandbox.run("import os\nprint(os.path.exists('/data/in.csv'), os.path.exists('/data'))")
    assert r.stdout == "False False\n", r.stdout


def test_images_are_only_for_the_default_runtime() -> None:
    with pytest.raises(ValueError, match="no images"):
        Sandbox("small", image="plain")
    with pytest.raises(ValueError, match="unknown image"):
        Sandbox("default", image="nope")


def test_a_run_never_sees_the_memory_of_the_run_before(image_sandbox: Sandbox) -> None:
    # instances reuse the engine's memory slots (pooling allocator, pages kept resident): what one
    # run wrote, in the image's pages or in memory it grew, is gone for the next
    lim = Limits(memory_mb=256)
    first = image_sandbox.run("import json, numpy as np\njson.wr_marker = 'leak'\n"
                              "x = np.full(60_000_000, 0x5A, np.uint8)\nprint(int(x.sum()) > 0)", limits=lim)
    assert first.ok and first.stdout == "True\n", first.stderr
    second = image_sandbox.run("import json, numpy as np\ny = np.empty(60_000_000, np.uint8)\n"
                               "print(int((y == 0x5A).sum()), hasattr(json, 'wr_marker'))", limits=lim)
    stale, marker = second.stdout.split()
    # a leak would show ~60 million; a few hundred 0x5A bytes are the image's own data
    assert second.ok and int(stale) < 100_000 and marker == "False", (second.stdout, second.stderr)
