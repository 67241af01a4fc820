"""Sessions with packages beyond the image (issue 37): opened with ``packages``, their instance
sees the wheelhouse from its first cell; a fork, a pause and a resume, a saved state and a
snapshot carry the package set; a resume where the lock no longer has it says so. Real guests,
a real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.live_server import KEY, live_server, make_config, wait_until
from wasm_runner import Sandbox
from wasm_runner.packages import PackageLock, PackageStore
from wasm_runner.sandbox import SnapshotRefused
from wasm_runner.sessions.packages import opened_packages, recorded_folders

MARKDOWN = 'from markdown_it import MarkdownIt\nprint(MarkdownIt().render("# Hi"), end="")\n'
HTML = "<h1>Hi</h1>\n"


@pytest.fixture(scope="module")
def store(package_lock: Path) -> PackageStore:
    return PackageStore.open(package_lock)


def _without_markdown(package_lock: Path, folder: Path) -> PackageStore:
    """The same wheelhouse after the operator took markdown-it-py out of the lock."""
    lock = PackageLock.read(package_lock)
    kept = {n: p for n, p in lock.packages.items() if n != "markdown-it-py"}
    path = folder / "packages.lock.json"
    PackageLock(kept).write(path)
    return PackageStore.open(path, store_root_of(package_lock))


def store_root_of(package_lock: Path) -> Path:
    return PackageStore.open(package_lock).root


def test_a_session_with_packages_imports_them_and_its_copies_and_snapshots_do_too(
    default_sandbox: Sandbox, store: PackageStore, package_lock: Path, tmp_path: Path
) -> None:
    opened = opened_packages(store, "default", ["markdown-it-py"])
    assert opened.names == ("markdown-it-py==4.2.0", "mdurl==0.1.2")
    with default_sandbox.session() as plain:  # the last expression shows as without packages
        shown = [o.data for o in plain.run("1 + 1").outputs]
    session = default_sandbox.session(packages=opened.folders, package_names=opened.names)
    try:
        first = session.run(MARKDOWN + "md = MarkdownIt()\n1 + 1")
        assert (first.status.value, first.stdout, [o.data for o in first.outputs]) == ("ok", HTML, shown), first.stderr
        (copy,) = session.fork(1)
        with copy:
            assert copy.run('print(md.render("*a*"), end="")').stdout == "<p><em>a</em></p>\n"
        blob = session.snapshot(owner="alice")
    finally:
        session.close()
    with default_sandbox.resume(blob, owner="alice", packages=recorded_folders(store, "default")) as resumed:
        again = resumed.run('import mdurl\nprint(md.render("# Hi"), mdurl.__name__, end="")')
        assert again.stdout == HTML + " mdurl", again.stderr
    with pytest.raises(SnapshotRefused) as refused:
        default_sandbox.resume(blob, owner="alice", packages=recorded_folders(_without_markdown(package_lock, tmp_path),
                                                                              "default"))
    assert refused.value.reason == "packages"
    assert str(refused.value) == (
        "The session was saved with package markdown-it-py==4.2.0, which this server's package lock no longer has "
        "(it has certifi==2026.10.19.post1, charset-normalizer==3.5.3, idna==3.21, mdurl==0.1.2, mpmath==1.3.0, "
        "requests==2.34.2, sympy==1.14.0, urllib3==2.8.0): open a new session, or ask the operator to put it back "
        "in the lock.")
    with pytest.raises(SnapshotRefused, match="its session had packages"):
        default_sandbox.resume(blob, owner="alice")


def test_sessions_with_packages_over_http_through_a_fork_a_pause_a_save_and_a_resume(
    package_lock: Path, tmp_path: Path
) -> None:
    config = make_config(tmp_path, packages_lock=package_lock, session_pause_seconds=1.0,
                         session_paused_lifetime_seconds=60.0)
    with live_server(config) as server, server.client(KEY) as api:
        refused = api.post("/api/sessions", json={"packages": ["leftpad"]})
        assert refused.status_code == 422 and refused.json()["error"] == {
            "code": "package_refused",
            "message": "The package leftpad is not allowed on this server (server tier and browser tier alike): the "
                       "operator's wheelhouse has certifi, charset-normalizer, idna, markdown-it-py, mdurl, mpmath, "
                       "requests, sympy, urllib3. Ask the operator to add it to the package lock."}, refused.text
        opened = api.post("/api/sessions", json={"packages": ["markdown-it-py"]})
        assert opened.status_code == 201 and opened.json()["packages"] == ["markdown-it-py==4.2.0", "mdurl==0.1.2"]
        sid = opened.json()["id"]
        first = api.post(f"/api/sessions/{sid}/run", json={"code": MARKDOWN + "md = MarkdownIt()"}).json()
        assert first["stdout"] == HTML, first

        plain = api.post("/api/sessions", json={}).json()["id"]
        for cell in ({"code": "x = 1", "packages": ["markdown-it-py"]}, {"code": MARKDOWN}):
            no = api.post(f"/api/sessions/{plain}/run", json=cell).json()
            assert no["status"] == "invalid_input" and no["message"] == (
                "This session was opened without packages, so its cells cannot use markdown-it-py: open a new "
                'session with "packages": ["markdown-it-py"] (POST /api/sessions).'), no
        assert api.post(f"/api/sessions/{plain}/run", json={"code": "print(2 + 2)"}).json()["stdout"] == "4\n"

        (copy,) = api.post(f"/api/sessions/{sid}/fork", json={}).json()["sessions"]
        assert copy["packages"] == ["markdown-it-py==4.2.0", "mdurl==0.1.2"]
        forked = api.post(f"/api/sessions/{copy['id']}/run", json={"code": 'print(md.render("*a*"), end="")'}).json()
        assert forked["stdout"] == "<p><em>a</em></p>\n", forked

        assert wait_until(lambda: api.get(f"/api/sessions/{sid}").json().get("paused") is True, timeout=90)
        woken = api.post(f"/api/sessions/{sid}/run", json={"code": 'import mdurl\nprint(md.render("# Hi"), end="")'})
        assert woken.json()["stdout"] == HTML and woken.json()["session"]["paused"] is False, woken.text

        saved = api.post(f"/api/sessions/{sid}/save").json()["saved_id"]
        again = api.post(f"/api/saved-sessions/{saved}/resume")
        assert again.status_code == 201 and again.json()["packages"] == ["markdown-it-py==4.2.0", "mdurl==0.1.2"]
        later = api.post(f"/api/sessions/{again.json()['id']}/run", json={"code": 'print(md.render("# Hi"), end="")'})
        assert later.json()["stdout"] == HTML, later.text
        blob = api.get(f"/api/sessions/{sid}/snapshot").content
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    cells = [(a["session"] == plain, a["packages"]) for a in audit if a.get("kind") == "session"]
    granted = ["markdown-it-py==4.2.0", "mdurl==0.1.2"]
    assert cells == [(False, granted), (True, []), (True, []), (True, []), (False, granted), (False, granted),
                     (False, granted)], cells

    # the operator took markdown-it-py out of the lock: its sessions do not resume, and say why
    other = tmp_path / "other"
    other.mkdir()
    smaller = _without_markdown(package_lock, other).lock_path
    with live_server(make_config(other, packages_lock=smaller)) as server, server.client(KEY) as api:
        resumed = api.post("/api/sessions/resume", content=blob, headers={"content-type": "application/octet-stream"})
        assert resumed.status_code == 422, resumed.text
        assert resumed.json()["error"]["message"] == (
            "the snapshot was refused (packages): The session was saved with package markdown-it-py==4.2.0, which "
            "this server's package lock no longer has (it has certifi==2026.10.19.post1, charset-normalizer==3.5.3, "
            "idna==3.21, mdurl==0.1.2, mpmath==1.3.0, requests==2.34.2, sympy==1.14.0, urllib3==2.8.0): open a "
            "new session, or ask the operator to put it back in the lock.")
        assert api.post("/api/run", json={"code": "print(3)"}).json()["stdout"] == "3\n"
