# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# Installs the guest package ``_wasm_runner_guest`` (output, tracebacks, limits, figures, rich, program,
# explain: the Python both tiers run around a program) into sys.modules. Both tiers run this function with
# the modules' sources: the server ahead of its runner (sandbox/wrapper.py builds that program, and
# hands the modules compiled by the guest itself in ``codes_file`` once they are cached), the
# browser ahead of its run helper (guest/browser.py; both generated into web/src/ by
# wasm_runner/exercises/webgen.py). The rules of guest code: guest/__init__.py.
# Every module is compiled as ``<wasm-runner>``: tracebacks leave its frames out. It leaves no
# name behind where it runs (its caller deletes it).
def _wr_guest(sources, codes_file=None):
    import sys
    codes = None
    if codes_file is not None:
        try:
            import marshal
            with open(codes_file, "rb") as f:
                codes = marshal.loads(f.read())
        except OSError:
            codes = None
    package = type(sys)("_wasm_runner_guest")
    package.__path__ = []
    sys.modules[package.__name__] = package
    for name, source in sources.items():
        module = type(sys)(package.__name__ + "." + name)
        module.__package__ = package.__name__
        sys.modules[module.__name__] = module
        setattr(package, name, module)
        code = codes[name] if codes is not None else compile(source, "<wasm-runner>", "exec")
        exec(code, module.__dict__)
