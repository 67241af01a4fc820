"""Explanations of errors and limits for beginners: what went wrong, said plainly, with one next
step and the failing part of the line (docs/explanations.md).

The guest computes an explanation, language-neutral (``guest/explain.py``: an id, its parameters
and the span), the same Python on both tiers; the host checks it (``validate``), adds those of the
limits it decided itself (``limits``) and renders it in the asked language from the message
catalogues (``catalogue``: gettext ``.po`` files in ``locale/``). The browser renders the same
catalogues (generated into ``web/src/explain-catalogue.js`` by ``python -m
wasm_runner.exercises.webgen``) with the same rule: ``{name}`` is a parameter, ``{{`` and ``}}``
are braces.
"""

from __future__ import annotations

from .catalogue import DEFAULT_LANGUAGE, LANG_DESCRIPTION, LANG_PATTERN, LANGUAGES, language_of, render, rendered_result
from .limits import for_limit
from .validate import checked

__all__ = ["DEFAULT_LANGUAGE", "LANG_DESCRIPTION", "LANG_PATTERN", "LANGUAGES", "checked", "for_limit", "language_of", "render", "rendered_result"]
