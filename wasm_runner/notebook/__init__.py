"""Notebooks: Jupyter MIME bundles from the guest's ``display()`` and last expressions
(``bundles.py``), and running a notebook's code cells in one session (``running.py``).

A face returns a run's rich outputs twice: ``outputs`` (the result's own entries, a bundle as
one entry of mime ``BUNDLE_MIME``) and ``notebook_outputs`` (nbformat v4 outputs).
``wasm_runner.notebook.running`` is imported on its own (``result.py`` imports this package).
"""

from .bundles import BUNDLE_KINDS, BUNDLE_MIME, bundle_of, checked_bundle, notebook_outputs

__all__ = ["BUNDLE_KINDS", "BUNDLE_MIME", "bundle_of", "checked_bundle", "notebook_outputs"]
