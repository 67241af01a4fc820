"""``wasm-runner cluster``: a local scale-out cluster in one foreground command (a face).

The launcher of ``wasm_runner.scaleout``: the replicas it starts share state through the rest of
that package.

It starts Debian's ``redis-server`` (shared state), N ``wasm-runner serve`` replicas on internal
loopback ports, and ``haproxy`` in front on ``127.0.0.1:PORT`` (round robin, health checks on
``/readyz``), and stops them all on Ctrl-C or SIGTERM. See docs/scale-out.md.

Reading order:

- ``children.py``: ``Child``, one supervised process (own process group, dies with the
  supervisor, output prefixed with its name), free ports, binaries and the package naming them.
- ``redis.py``: the redis-server command line (loopback, no persistence) and its PING.
- ``replicas.py``: a replica's ``serve`` command line, environment and readiness.
- ``haproxy.py``: the generated haproxy.cfg (timeouts from the config) and the stats socket.
- ``supervisor.py``: ``Cluster``: start in order, wait until ready, watch, restart, stop.
- ``cli.py``: the ``wasm-runner cluster`` arguments and ``main``.
"""

from __future__ import annotations

__all__: list[str] = []
