"""The browser tier's server side (a face): the playground and embed pages (``pages``), their
content-hashed, precompressed assets (``assets``), where the web files are (``locations``) and the
local wheelhouse (``wheelhouse``).
The guest code itself runs in the visitor's browser (Pyodide), never on this server."""

__all__: list[str] = []
