"""The local wheelhouse: pure wheels (pip, pypa build), a stand-in Pyodide release imported with its
hashes checked, safe archive extraction, and the rewritten Pyodide lock.

Lock entries are made by pyodide-lock in the pyodide-build venv (scripts/setup.sh makes it); the
release is a small stand-in shaped like the official one (its lock has the real schema), built here.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from wasm_runner.browser.archives import ArchiveError, safe_extract
from wasm_runner.browser.locations import web_dir
from wasm_runner.browser.release import declared_pyodide_version
from wasm_runner.browser.wheelhouse import (
    OFFICIAL_INDEX_TEMPLATE,
    import_release,
    main,
    read_manifest,
    rewrite_lock,
)

STOCK = {
    "info": {"python": "3.14.2"},
    "packages": {
        "numpy": {"name": "numpy", "file_name": "numpy-2.3.0-cp314-cp314-pyodide_2026_0_wasm32.whl", "sha256": "ab"},
        "six": {"name": "six", "file_name": "six-1.16.0-py2.py3-none-any.whl", "sha256": "cd"},
    },
}
NUMPY_FILE = "numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl"


def make_wheel(
    folder: Path,
    name: str = "tiny_pkg",
    version: str = "1.2.0",
    files: dict[str, str] | None = None,
    requires: tuple[str, ...] | None = None,
    file_name: str | None = None,
) -> Path:
    """A real, installable wheel (with RECORD), made here so tests stay offline."""
    wheel = folder / (file_name or f"{name}-{version}-py3-none-any.whl")
    info = f"{name}-{version}.dist-info"
    if requires is None:
        requires = ("six>=1.0", "pytest ; extra == 'test'") if name != "six" else ()
    metadata = f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    content = dict(files or {f"{name}/__init__.py": "VALUE = 42\n"})
    content[f"{info}/METADATA"] = metadata
    content[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    content[f"{info}/top_level.txt"] = f"{name}\n"
    record = []
    for path, text in content.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    content[f"{info}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in content.items():
            archive.writestr(path, text)
    return wheel


def _entry(wheel: Path, name: str, version: str, depends: list[str]) -> dict[str, object]:
    return {
        "name": name, "version": version, "file_name": wheel.name, "install_dir": "site",
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "package_type": "package",
        "imports": [name.replace("-", "_")], "depends": depends, "unvendored_tests": False, "tool": {},
    }


def make_release(folder: Path, version: str | None = None, version_in: str = "lock") -> Path:
    """A stand-in for the official Pyodide release folder: ``pyodide-lock.json`` with the real
    schema (the installed lock's info) and three packages: ``numpy`` (a tiny pure-Python
    stand-in with a compiled wheel's file name, telling itself apart by ``numpy.__stand_in__``),
    its dependency ``standin-helper``, and ``pandas`` (depends on numpy; never asked for here).
    ``version_in``: where the Pyodide version is written, ``lock`` (info.version) or
    ``package.json`` (as pyodide-lock 0.2 writes locks, without info.version)."""
    folder.mkdir(parents=True, exist_ok=True)
    version = version or declared_pyodide_version(web_dir())
    installed = json.loads((web_dir() / "node_modules" / "pyodide" / "pyodide-lock.json").read_text())
    helper = make_wheel(folder, "standin_helper", "1.0.0", {"standin_helper.py": "MARK = 'offline ok'\n"}, ())
    numpy = make_wheel(
        folder, "numpy", "2.4.6",
        {"numpy/__init__.py": "import standin_helper\n__version__ = '2.4.6'\n"
         "__stand_in__ = 'numpy stand-in: ' + standin_helper.MARK\n"},
        ("standin-helper",), NUMPY_FILE,
    )
    pandas = make_wheel(folder, "pandas", "3.0.2", {"pandas/__init__.py": "import numpy\n"}, ("numpy",),
                        "pandas-3.0.2-cp314-cp314-pyemscripten_2026_0_wasm32.whl")
    info = dict(installed["info"])
    if version_in == "lock":
        info["version"] = version
    else:
        (folder / "package.json").write_text(json.dumps({"name": "pyodide", "version": version}))
    lock = {
        "info": info,
        "packages": {
            "numpy": _entry(numpy, "numpy", "2.4.6", ["standin-helper"]),
            "standin-helper": _entry(helper, "standin-helper", "1.0.0", []),
            "pandas": _entry(pandas, "pandas", "3.0.2", ["numpy"]),
        },
    }
    (folder / "pyodide-lock.json").write_text(json.dumps(lock, indent=2))
    return folder


def make_archive(release: Path, archive: Path) -> Path:
    """The release as the user downloads it: one ``pyodide/`` folder inside the archive."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive, "w") as zipped:
            for path in sorted(release.iterdir()):
                zipped.write(path, f"pyodide/{path.name}")
    else:
        with tarfile.open(archive, "w:bz2" if archive.name.endswith(".bz2") else "w:gz") as tar:
            tar.add(release, arcname="pyodide")
    return archive


def test_rewrite_lock_sends_stock_packages_to_the_index_and_keeps_local_ones_relative():
    local = {"tiny-pkg": {"name": "tiny-pkg", "file_name": "tiny_pkg-1.2.0-py3-none-any.whl", "sha256": "ef"}}
    index = OFFICIAL_INDEX_TEMPLATE.format(version="314.0.7")
    lock = rewrite_lock(STOCK, index, local)
    assert lock["packages"]["numpy"]["file_name"] == index + STOCK["packages"]["numpy"]["file_name"]
    assert lock["packages"]["tiny-pkg"]["file_name"] == local["tiny-pkg"]["file_name"]
    assert STOCK["packages"]["numpy"]["file_name"].startswith("numpy-")  # the stock lock is not mutated
    offline = rewrite_lock(STOCK, "", local)
    assert set(offline["packages"]) == {"tiny-pkg"}


def test_pure_wheels_get_lock_entries_from_pyodide_lock(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    wheel = make_wheel(source)  # tiny-pkg, which depends on six
    make_wheel(source, "six", "1.17.0")
    out = tmp_path / "wheelhouse"
    assert main(["tiny-pkg", "--find-links", str(source), "--out", str(out), "--index-url", ""]) == 0
    entries = read_manifest(out)
    assert set(entries) == {"tiny-pkg", "six"}
    tiny = entries["tiny-pkg"]
    assert tiny["version"] == "1.2.0" and tiny["file_name"] == wheel.name
    assert tiny["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert tiny["imports"] == ["tiny_pkg"] and tiny["depends"] == ["six"]  # extras are not dependencies
    manifest = json.loads((out / "wheelhouse.json").read_text())
    assert manifest["info"]["abi_version"]  # a whole lock (pyodide-lock's schema), local entries only
    preview = json.loads((out / "pyodide-lock.json").read_text())
    assert set(preview["packages"]) == {"tiny-pkg", "six"}  # offline preview: local files only


def test_a_dependency_found_nowhere_is_refused(tmp_path, capsys):
    source = tmp_path / "source"
    source.mkdir()
    make_wheel(source, "lonely", "1.0", requires=("nowhere-to-be-found>=1",))
    make_wheel(source, "nowhere_to_be_found", "1.0", requires=())
    # pip finds both, but the wheelhouse is asked for 'lonely' and pyodide-lock checks its needs:
    (source / "nowhere_to_be_found-1.0-py3-none-any.whl").unlink()
    out = tmp_path / "wheelhouse"
    assert main(["lonely", "--find-links", str(source), "--out", str(out)]) == 1
    assert "nowhere-to-be-found" in capsys.readouterr().err
    assert not out.exists()


def test_a_pure_sdist_is_built_with_pypa_build(tmp_path):
    project = tmp_path / "tinysd-0.1.0"
    (project / "tinysd").mkdir(parents=True)
    (project / "tinysd" / "__init__.py").write_text("X = 1\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinysd"\nversion = "0.1.0"\n'
    )
    (project / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: tinysd\nVersion: 0.1.0\n")
    sdist = tmp_path / "tinysd-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(project, arcname=project.name)
    out = tmp_path / "wheelhouse"
    assert main([str(sdist), "--out", str(out)]) == 0
    entry = read_manifest(out)["tinysd"]
    assert entry["file_name"] == "tinysd-0.1.0-py3-none-any.whl" and entry["imports"] == ["tinysd"]
    assert (out / entry["file_name"]).is_file()


@pytest.mark.parametrize("kind", ["folder", "tar.bz2", "zip"])
def test_release_import_takes_the_named_packages_and_their_dependencies(tmp_path, kind):
    release = make_release(tmp_path / "release", version_in="lock" if kind != "zip" else "package.json")
    path = release if kind == "folder" else make_archive(release, tmp_path / f"pyodide-test.{kind}")
    out = tmp_path / "wheelhouse"
    assert main(["--from-release", str(path), "NumPy", "--out", str(out)]) == 0
    entries = read_manifest(out)
    assert set(entries) == {"numpy", "standin-helper"}  # pandas was not asked for
    lock = json.loads((release / "pyodide-lock.json").read_text())
    for name, entry in entries.items():
        assert entry["sha256"] == lock["packages"][name]["sha256"]
        assert hashlib.sha256((out / entry["file_name"]).read_bytes()).hexdigest() == entry["sha256"]
    assert not (out / "pandas-3.0.2-cp314-cp314-pyemscripten_2026_0_wasm32.whl").exists()
    # --all takes every package; the earlier entries stay
    assert main(["--from-release", str(path), "--all", "--out", str(out)]) == 0
    assert set(read_manifest(out)) == {"numpy", "standin-helper", "pandas"}


def test_a_tampered_wheel_is_refused_and_the_old_wheelhouse_stays(tmp_path, capsys):
    release = make_release(tmp_path / "release")
    out = tmp_path / "wheelhouse"
    import_release(release, ["standin-helper"], out)
    before = sorted(p.name for p in out.iterdir())
    with zipfile.ZipFile(release / NUMPY_FILE, "a") as wheel:
        wheel.writestr("numpy/evil.py", "import os\n")
    archive = make_archive(release, tmp_path / "pyodide-test.tar.gz")
    for path in (release, archive):
        assert main(["--from-release", str(path), "numpy", "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert NUMPY_FILE in err and "does not match" in err and "[release_hash_mismatch]" in err
        assert sorted(p.name for p in out.iterdir()) == before  # nothing half-imported
        assert set(read_manifest(out)) == {"standin-helper"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".wheelhouse")] == []


def test_a_release_of_another_pyodide_is_refused(tmp_path, capsys):
    declared = declared_pyodide_version(web_dir())
    for version_in in ("lock", "package.json"):
        release = make_release(tmp_path / version_in, version="0.27.7", version_in=version_in)
        assert main(["--from-release", str(release), "numpy", "--out", str(tmp_path / "wh")]) == 1
        err = capsys.readouterr().err
        assert f"is Pyodide 0.27.7, but this server runs Pyodide {declared}" in err
        assert "[release_version_mismatch]" in err
    release = make_release(tmp_path / "abi")
    lock = json.loads((release / "pyodide-lock.json").read_text())
    lock["info"]["abi_version"] = "1999_0"
    (release / "pyodide-lock.json").write_text(json.dumps(lock))
    assert main(["--from-release", str(release), "numpy", "--out", str(tmp_path / "wh")]) == 1
    assert "[release_abi_mismatch]" in capsys.readouterr().err
    assert not (tmp_path / "wh").exists()


def test_release_import_refuses_bad_input_with_a_message(tmp_path, capsys):
    release = make_release(tmp_path / "release")
    (release / "empty").mkdir()
    out = str(tmp_path / "wh")
    cases = [
        (["--from-release", str(release), "--out", out], 2, "name the release's packages"),
        (["--from-release", str(release), "scipy", "--out", out], 1, "not in this release's pyodide-lock.json: scipy"),
        (["--from-release", str(tmp_path / "missing"), "numpy", "--out", out], 1, "does not exist"),
        (["--from-release", str(release / "empty"), "numpy", "--out", out], 1, "is not a Pyodide release"),
        ([], 2, "name at least one package"),
        (["-r", str(tmp_path / "missing.txt")], 2, "cannot read"),
    ]
    for argv, status, message in cases:
        assert main(argv) == status, argv
        assert message in capsys.readouterr().err


def _tar_with(path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        ok = tarfile.TarInfo("pyodide/pyodide-lock.json")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"{}"))
        tar.addfile(member, io.BytesIO(data) if data else None)
    return path


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/escape.txt", "pyodide/../../escape.txt"])
def test_archive_members_outside_the_folder_are_refused(tmp_path, name):
    member = tarfile.TarInfo(name)
    member.size = 3
    archive = _tar_with(tmp_path / "bad.tar.gz", member, b"bad")
    target = tmp_path / "out" / "x"
    with pytest.raises(ArchiveError, match="outside the folder") as caught:
        safe_extract(archive, target)
    assert caught.value.code == "unsafe_archive"
    assert not (tmp_path / "out" / "escape.txt").exists() and not (tmp_path / "escape.txt").exists()
    assert list(target.iterdir()) == []  # refused before anything was written


def test_an_archive_that_unpacks_too_large_is_refused_before_writing(tmp_path, monkeypatch):
    import wasm_runner.browser.archives as archives

    monkeypatch.setattr(archives, "MAX_TOTAL_BYTES", 1 << 10)  # the real bound is 8 GiB
    big = tarfile.TarInfo("pyodide/big.whl")
    big.size = 4 << 10
    target = tmp_path / "out"
    with pytest.raises(ArchiveError, match="unpacking to") as caught:
        safe_extract(_tar_with(tmp_path / "big.tar.gz", big, b"x" * (4 << 10)), target)
    assert caught.value.code == "archive_too_large"
    assert list(target.iterdir()) == []  # refused before anything was written


def test_archive_links_are_refused(tmp_path):
    link = tarfile.TarInfo("pyodide/numpy.whl")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(ArchiveError, match="is a link"):
        safe_extract(_tar_with(tmp_path / "link.tar.gz", link), tmp_path / "out")
    zipped = tmp_path / "link.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        info = zipfile.ZipInfo("pyodide/numpy.whl")
        info.external_attr = (0o120777 << 16)  # a symlink, as zip -y stores it
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="is a link"):
        safe_extract(zipped, tmp_path / "out2")
    # a good archive is still imported afterwards
    release = make_release(tmp_path / "release")
    out = tmp_path / "wh"
    import_release(make_archive(release, tmp_path / "good.zip"), ["numpy"], out)
    assert (out / NUMPY_FILE).is_file()


def test_the_real_release_lock_is_read_by_pyodide_lock_and_its_dependencies_followed(tmp_path):
    """The lock shipped in the npm package is the release's (same schema, 350+ entries)."""
    from wasm_runner.browser.pyodide_tools import lock_tool
    from wasm_runner.browser.release import Release

    real = web_dir() / "node_modules" / "pyodide" / "pyodide-lock.json"
    answer = lock_tool({"op": "read", "lock": str(real)})
    release = Release.open(tmp_path, answer["lock"], answer["raw_info"])
    chosen = release.select(["pandas"])
    expected = {"pandas", *answer["lock"]["packages"]["pandas"]["depends"]}
    assert expected <= set(chosen) and "numpy" in chosen
    assert all(set(entry["depends"]) <= set(chosen) for entry in chosen.values())  # closed under depends
    assert len(release.select([])) == len(answer["lock"]["packages"])
