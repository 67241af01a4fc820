# category: bridge
# attack: in Pyodide, reaches the JavaScript host through the js module: environment, files, processes
# expect: harmless
try:
    import js
except ImportError:
    print("no js bridge")
else:
    try:
        print("secret:", js.process.env.@@SECRET_NAME@@)
    except Exception as exc:
        print("env refused:", type(exc).__name__)
    try:
        from pyodide.code import run_js
        run_js(
            "(() => { const fs = process.getBuiltinModule('fs');"
            " fs.writeFileSync('@@CANARY_DIR@@/js-was-here', fs.readFileSync('@@CANARY_FILE@@')); })()"
        )
        print("wrote through node fs")
    except Exception as exc:
        print("fs refused:", type(exc).__name__)
