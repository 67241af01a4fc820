"""Packages beyond the image: the operator's wheelhouse on the server tier (issue 37)."""
