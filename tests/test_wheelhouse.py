"""The local wheelhouse: lock entries for pure-Python wheels and the rewritten Pyodide lock."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from wasm_runner.browser.wheelhouse import (
    OFFICIAL_INDEX_TEMPLATE,
    lock_entry,
    main,
    rewrite_lock,
)

STOCK = {
    "info": {"python": "3.14.2"},
    "packages": {
        "numpy": {
            "name": "numpy",
            "file_name": "numpy-2.3.0-cp314-cp314-pyodide_2026_0_wasm32.whl",
            "sha256": "ab",
        },
        "six": {
            "name": "six",
            "file_name": "six-1.16.0-py2.py3-none-any.whl",
            "sha256": "cd",
        },
    },
}


def make_wheel(folder: Path, name: str = "tiny_pkg", version: str = "1.2.0") -> Path:
    """A real, installable pure-Python wheel (with RECORD), made here so tests stay offline."""
    import base64

    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
        + (
            "Requires-Dist: six>=1.0\nRequires-Dist: pytest ; extra == 'test'\n"
            if name != "six"
            else ""
        )
    )
    files = {
        f"{name}/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{name}\n",
    }
    record = []
    for path, text in files.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_lock_entry_hashes_and_names_a_pure_wheel(tmp_path):
    wheel = make_wheel(tmp_path)
    entry = lock_entry(wheel)
    assert entry["name"] == "tiny-pkg"
    assert entry["version"] == "1.2.0"
    assert entry["file_name"] == wheel.name
    assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert entry["imports"] == ["tiny_pkg"]
    assert entry["depends"] == ["six"]  # extras are not dependencies


def test_lock_entry_refuses_a_compiled_wheel(tmp_path):
    compiled = tmp_path / "fast-1.0-cp314-cp314-pyodide_2026_0_wasm32.whl"
    compiled.write_bytes(b"")
    with pytest.raises(ValueError, match="not a pure-Python wheel"):
        lock_entry(compiled)


def test_rewrite_lock_sends_stock_packages_to_the_index_and_keeps_local_ones_relative(
    tmp_path,
):
    local = {"tiny-pkg": lock_entry(make_wheel(tmp_path))}
    index = OFFICIAL_INDEX_TEMPLATE.format(version="314.0.7")
    lock = rewrite_lock(STOCK, index, local)
    assert (
        lock["packages"]["numpy"]["file_name"]
        == index + STOCK["packages"]["numpy"]["file_name"]
    )
    assert lock["packages"]["tiny-pkg"]["file_name"] == local["tiny-pkg"]["file_name"]
    assert STOCK["packages"]["numpy"]["file_name"].startswith(
        "numpy-"
    )  # the stock lock is not mutated
    offline = rewrite_lock(STOCK, "", local)
    assert set(offline["packages"]) == {"tiny-pkg"}


def test_command_refuses_bad_input_with_a_message(capsys, tmp_path):
    assert main([]) == 2
    assert "name at least one package" in capsys.readouterr().err
    assert main(["-r", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
