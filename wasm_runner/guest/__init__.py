"""Guest code: the Python that runs inside the sandbox, around the user's program, on both tiers.

Nothing here is imported by the host. The files are read as text and shipped to the guest:

- **The guest package** ``_wasm_runner_guest`` (``GUEST_MODULES`` in ``sandbox/wrapper.py``):
  ``output.py`` (stdout and stderr as one ordered, batched stream), ``tracebacks.py`` (the
  program's frames only; exit codes as CPython's), ``limits.py`` (the recursion limit as in
  ``python main.py``), ``figures.py`` (matplotlib figures, the turtle's drawing), ``rich.py``
  (Jupyter MIME bundles of ``display(obj)`` and of the last expression) and
  ``program.py`` (what a run does around the program: reseeding ``random``, ``numpy.random`` and
  tempfile's names, ``sys.argv`` and the source for tracebacks, compiling the program and its last
  expression, what a run shows when it ends). ``install.py`` installs them, in that order, on
  both tiers.
- **The server tier**: ``runner.py``, the wrapper that reads jobs from the host (loaded after the
  package, ``sandbox/wrapper.py``); ``host_module.py`` with ``wasm_runner/codec.py``, the ``host``
  module of a run that has host functions (``host_functions/program.py``); ``network.py``,
  the network shim the loader fetches from the host when the program first imports ``socket`` or
  ``http.client`` (``network/``); ``check_harness.py``
  (one teacher test against the student's code; the browser runs it too, from
  ``web/src/checking.js``) and ``check_agent.py``, the exercise checker's programs
  (``exercises/``); ``lib/turtle.py``, the window-less ``turtle``.
- **The browser tier** (Pyodide in a Web Worker): ``browser.py``, the run helper the worker
  installs as the module ``_wasm_runner`` after the package (input(), a time.sleep a Stop
  interrupts, calls of the page's functions, the reset between runs in one interpreter);
  with the package, ``host_module.py``, ``codec.py``, ``network.py`` (the same shim, its requests
  sent to the runner: ``network/browser_runs.py``) and ``lib/turtle.py``. Generated into
  ``web/src/pylib.js`` and ``web/src/bootstrap.py.js`` by ``python -m
  wasm_runner.exercises.webgen``; ``tests/exercises/test_checker.py`` fails when they are stale.

**Guest code the host imports too** lives beside the host code that uses it, not here, because
this folder is never imported by the host: ``wasm_runner/codec.py`` (plain data across a
boundary: the host's side of host functions and exercise checks, and, shipped as text, the
guest's), ``wasm_runner/exercises/judging.py`` (judging a check: the server's checker on the
host, the browser's practice checks in Pyodide) and ``wasm_runner/exercises/practice.py`` (the
browser's practice checking, tested on the host). They keep the rules below, as the files here
do; ``tests/test_layout.py`` checks that they import nothing of the package.

The rules of guest code:

- **Standard library only**, and only what both interpreters have (CPython on WASI, Pyodide): a
  module that uses a package (matplotlib, numpy) looks it up in ``sys.modules`` and does nothing
  when the program did not import it.
- **No names left behind.** What the runners put where the program can see it (``__main__``,
  ``builtins``, modules it may import) is named ``_wr_...`` or is a private name of a module of
  ours; the server's wrapper is the function ``_wr_main`` and the installer ``_wr_guest``, which
  delete themselves from ``__main__``. The one exception is the builtin ``display`` (rich.py):
  it is the notebook's own name, which programs written for Jupyter call.
- **Compiled as ``<wasm-runner>``.** Every file here is compiled under that one file name, which
  is how ``tracebacks.py`` leaves the runner's frames out of the program's traceback.
- **Trusted by nobody.** Guest code runs beside the program, which can replace any of it: the
  host decides every status from what it saw itself, and checks everything the guest sends.
- **One copy for both tiers.** What both tiers do is written once, in the package; what only one
  tier does lives in its runner (``runner.py``, ``browser.py``), and the differences between the
  tiers that remain are listed in ``docs/browser.md`` ("The two tiers").
- **Edits cost a rebuild.** The package and ``runner.py`` are hashed into the server's image key
  (``images.image_key`` with ``sandbox/wrapper.py``'s ``BOOT_SOURCE``): editing them rebuilds and
  recompiles every image (about 15-20 minutes on two cores). ``browser.py`` and the package are
  inputs of the browser's Pyodide memory snapshot (``browser/pyodide_snapshot.py``). This file
  is neither: it is never shipped.
"""
