"""The exercises a server serves (``[server] exercises_dir``), loaded once, on first use.

The service builds one ``ExerciseCatalog`` (``service.Service.exercises``); the exercise routes
(``routes/exercises.py``) read it. A server without a folder answers ``404 no_exercises``; a folder
that cannot be loaded ``503 exercises_unavailable``, said plainly (tried again on the next call).
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..execution import Refused
from .model import Exercise, ExerciseError, load_folder

__all__ = ["ExerciseCatalog"]


class ExerciseCatalog:
    """The exercises in ``folder`` (None: this server has none), by id."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._loaded: dict[str, Exercise] | None = None

    def all(self) -> dict[str, Exercise]:
        """Every exercise by id (loaded on the first call; blocking)."""
        with self._lock:
            if self._loaded is None:
                if self.folder is None:
                    raise Refused(404, "no_exercises", "this server has no exercises configured")
                try:
                    self._loaded = load_folder(self.folder)
                except ExerciseError as exc:
                    raise Refused(503, "exercises_unavailable", f"the exercises cannot be loaded: {exc}") from None
            return self._loaded
