"""The session manager: every open session of one executor, for every face (HTTP, MCP, the
internal hop), and what happens to it: opened, run, paused to disk and woken, forked, sealed,
resumed, saved under a handle, handed to another replica or recovered from a lost one.

A session is one long-lived guest instance (``sandbox.Session``) whose variables and files last
between calls. Words, kept apart: a session's *state* is what its instance holds (its memory and
files); *sealing* makes that state a snapshot only its key can open (``sandbox.sealing``); the
*paused-session store* (``PausedStore``) is the folder where sealed states wait, of paused
sessions and of sessions saved on purpose.

Where things live (reading order):

- ``live``: ``LiveSession``, one open session and what the store tracks about it;
- ``directory``: the session directory as the manager sees it (``SessionListener``,
  ``SessionDirectory``, the records ``Entry`` and ``Saved``); its implementations, one host or
  Redis, are ``scaleout.directory``'s;
- ``packages``: a session's packages beyond the image (opened with, checked per cell, resolved on resume);
- ``folders``: a session's private folders (``/data``, ``/out``): made, copied for a fork, sealed
  with its state and restored;
- ``paused``: the paused-session store (``PausedStore``, ``PausedStoreFull``, ``SavedState``) and
  how a store pauses (``Pausing``: its ``PausedStore``, after how long, for how long);
- ``SessionStore``, the one session manager, is one class whose jobs are one module each, each a
  layer of it, imported only downwards: ``base`` (``StoreBase``: the table of open sessions, the
  caps, what the listener and the audit are told), ``pausing`` (pause idle sessions, save them in
  the background, wake them, adopt a lost owner's, sweep orphaned snapshots, hand sessions over on
  a drain), ``forking`` (fork, snapshot, resume, label), ``saved`` (saved states: save, load,
  delete) and ``store`` (``SessionStore``: open, get, run, upload, close, sweep);
- ``recovery``: ``SessionRecovery``, a lost owner's session resumed here from its stored state.

The one-instance core stays in ``sandbox/``: ``sandbox/session.py`` (``Session``: one instance's
calls, fork, snapshot), ``sandbox/session_state.py`` (what a snapshot of it holds) and
``sandbox/sealing.py`` (sealing). ``Sandbox.session()`` and ``Sandbox.resume()`` return a
``Session``, and the sandbox is below this package (it never imports it), so those stay with it;
this package manages many of them.

The ``Executor`` (``execution.executor``) owns one ``SessionStore``, whose calls it runs: the
executor sits above this package, which uses the rest of ``execution`` (``Runner``, ``Job``,
``Refused``, policies) and ``admission`` (``Gate``) through their modules. This is a core package: it imports no face
and no scale-out part. The names below are its public surface: ``from wasm_runner.sessions import X``.
"""

from .directory import Entry, Saved, SessionDirectory, SessionListener
from .live import LiveSession
from .paused import PausedStore, PausedStoreFull, Pausing, SavedState, paused_store
from .recovery import SessionRecovery
from .store import SessionStore

__all__ = [
    "Entry", "LiveSession", "PausedStore", "PausedStoreFull", "Pausing", "Saved", "SavedState",
    "SessionDirectory", "SessionListener", "SessionRecovery", "SessionStore", "paused_store",
]  # fmt: skip
