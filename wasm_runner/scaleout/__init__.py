"""Scale-out: what makes several ``wasm-runner serve`` replicas work as one service.

One host needs none of it (no ``redis_url``: everything stays in the process). With several
replicas behind a balancer (docs/scale-out.md), in reading order:

- ``state``: ``SharedState``, the replica's Redis client, every call bounded in time
  (``SharedStateUnavailable``: ``503 shared_state_unavailable``).
- ``leases``: per-key runs in flight and open sessions counted across replicas, kept alive by
  their owner, dropped with a dead replica's heartbeat (``RedisLeases``: admission's
  ``wasm_runner.admission.Leases`` in Redis).
- ``directory``: which replica holds a session or a download link.
- ``signing``: the internal hop's headers and HMAC with the cluster secret, and their check.
- ``forwarding``: who holds the session or link a call is for, the signed call passed on, the
  ``410`` when its owner is gone (the HTTP face relays it: ``http.relay``, ``http.internal``).
- ``drain``: ready / warming / draining for the balancer, and the drain on SIGTERM (which stops
  admission: ``Lifecycle`` is its ``wasm_runner.admission.Opening``).
- ``launcher/``: ``wasm-runner cluster``, a local cluster (Redis, N replicas, HAProxy) in one
  foreground command.

The HTTP face builds these parts (``http.service.Service``) and keeps the routes and the request
guards; nothing here imports the HTTP face.
"""

__all__: list[str] = []
