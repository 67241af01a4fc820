"""The lock, the wheels and what a program asks for, without a guest: wheels made here (offline)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.browser.test_wheelhouse import make_wheel
from wasm_runner.execution import Executor, Job
from wasm_runner.packages import LockError, PackageLock, PackageRefused, PackageStore, wanted_packages
from wasm_runner.packages.lock import LockedPackage
from wasm_runner.packages.wanted import required_in_comments
from wasm_runner.packages.wheels import WheelError, read_wheel, unpack_wheel

SHA = "ab" * 32


def _lock(**packages: LockedPackage) -> PackageLock:
    return PackageLock(packages)


LOCK = _lock(
    **{"markdown-it-py": LockedPackage("markdown-it-py", "4.2.0", "markdown_it_py-4.2.0-py3-none-any.whl", SHA,
                                       ("markdown_it",), ("mdurl",)),
       "mdurl": LockedPackage("mdurl", "0.1.2", "mdurl-0.1.2-py3-none-any.whl", SHA, ("mdurl",))}
)


def test_a_lock_round_trips_and_a_dependency_it_does_not_pin_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "packages.lock.json"
    LOCK.write(path)
    assert PackageLock.read(path) == LOCK
    assert [p.name for p in LOCK.closure(["markdown-it-py"])] == ["markdown-it-py", "mdurl"]
    data = LOCK.to_dict()
    del data["packages"]["mdurl"]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="markdown-it-py requires mdurl, which the lock does not pin"):
        PackageLock.from_dict(data)
    path.write_text('{"format": 1, "packages": {"x": {"version": "1", "wheel": "x-1-py3-none-any.whl", "sha256": "no"}}}')
    with pytest.raises(LockError, match="sha256 must be 64 hex digits"):
        PackageLock.read(path)


def test_a_program_asks_by_name_by_requires_line_and_by_import() -> None:
    code = "# requires: mdurl, numpy\nimport os\nfrom markdown_it.main import MarkdownIt\n"
    assert required_in_comments(code) == ["mdurl", "numpy"]
    assert required_in_comments("# requires: Python 3.12\n# Requires: nothing, it is prose\n") == []
    image = frozenset({"numpy", "os"})
    assert wanted_packages(LOCK, code, image_modules=image) == ["markdown-it-py", "mdurl"]
    assert wanted_packages(LOCK, "print(1)", ["Markdown_It_Py"]) == ["markdown-it-py"]
    assert wanted_packages(LOCK, "import mine  # the program's own module, given as a file") == []


def test_a_package_not_allowed_gets_one_sentence_naming_it() -> None:
    with pytest.raises(PackageRefused) as refused:
        wanted_packages(LOCK, "# requires: leftpad\nprint(1)")
    assert str(refused.value) == (
        "The package leftpad is not allowed on this server (server tier and browser tier alike): the operator's "
        "wheelhouse has markdown-it-py, mdurl. Ask the operator to add it to the package lock.")
    with pytest.raises(PackageRefused, match="at most 64 packages"):
        wanted_packages(LOCK, "", ["mdurl"] * 65)


def test_each_executor_names_the_browser_tier_only_from_its_own_source() -> None:
    """Two servers in one process: the refusal names the browser tier from the source each was
    given, and an executor given none (the CLI's) says no tier has the package."""
    with_browser = Executor(workers=1, packages=PackageStore(Path("unused.lock"), LOCK, Path("unused")),
                            browser_modules=lambda: frozenset({"click"}))
    without = Executor(workers=1, packages=PackageStore(Path("unused.lock"), LOCK, Path("unused")))
    try:
        with pytest.raises(PackageRefused) as named:
            with_browser.package_folders(Job("import click", packages=("click",)))
        assert str(named.value) == "click is not on the server tier; it is on the browser tier: run there, or choose auto."
        with pytest.raises(PackageRefused) as nowhere:
            without.package_folders(Job("import click", packages=("click",)))
        assert str(nowhere.value).startswith("The package click is not allowed on this server (server tier and browser")
        assert "browser tier only" not in str(nowhere.value)
    finally:
        with_browser.shutdown()
        without.shutdown()


def test_only_a_pure_python_wheel_is_read_and_unpacking_never_leaves_its_folder(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny_pkg", requires=("six>=1.0", "pytest ; extra == 'test'"))
    info = read_wheel(wheel)
    assert (info.name, info.version, info.imports, info.requires) == ("tiny-pkg", "1.2.0", ("tiny_pkg",), ("six",))
    compiled = make_wheel(tmp_path, "fast", file_name="fast-1.0-cp315-cp315-manylinux_2_28_x86_64.whl")
    with pytest.raises(WheelError, match="not a pure-Python wheel"):
        read_wheel(compiled)
    evil = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../outside.py", "x = 1\n")
    (tmp_path / "dest").mkdir()
    with pytest.raises(WheelError, match="unsafe entry"):
        unpack_wheel(evil, tmp_path / "dest")
    assert not (tmp_path / "outside.py").exists()


def test_a_server_whose_lock_cannot_be_read_does_not_start(tmp_path: Path) -> None:
    from wasm_runner.settings import ConfigError, ServerConfig

    with pytest.raises(ConfigError, match=r"packages_lock: cannot read the package lock .*none\.json"):
        ServerConfig.from_keys(auth=False, packages_lock=tmp_path / "none.json")
    LOCK.write(tmp_path / "packages.lock.json")
    assert ServerConfig.from_keys(auth=False, packages_lock=tmp_path / "packages.lock.json").packages_lock
