"""``RunRecord``: the server's ``Executor``'s ``Recorder`` (``execution.Recorder``): the record of
every finished run in the metrics (``metrics.py``) and the audit log (``audit.py``), the audit
log's line of a session's fork, snapshot or resume, and a refusal counted by its reason (the
admission gate's ``on_refused``).
"""

from __future__ import annotations


from ..execution import Job
from ..execution.running import SessionFacts
from ..result import Result
from .audit import AuditLog
from .metrics import Metrics

__all__ = ["RunRecord"]


class RunRecord:
    """Metrics and the audit log of every finished run, the audit log's line of a session's fork,
    snapshot or resume, and the count of every refusal by its reason."""

    def __init__(self, metrics: Metrics, audit: AuditLog) -> None:
        self.metrics = metrics
        self.audit = audit

    def record(self, job: Job, result: Result, waited: float) -> None:
        self.metrics.queue_seconds.observe(waited)
        self.metrics.observe(result, job.profile.name, job.kind)
        host_calls = job.host_calls.rows()
        self.metrics.observe_host_calls(host_calls)
        self.audit.record(
            request_id=job.request_id,
            tenant=job.tenant.name,
            client=job.client,
            kind=job.kind,
            profile=job.profile.name,
            limits=job.limits,
            code=job.code if isinstance(job.code, str) else job.code.decode("utf-8", "replace"),
            stdin=job.stdin if not isinstance(job.stdin, bytes) else job.stdin.decode("utf-8", "replace"),
            files_in=job.files,
            result=result,
            session=job.session_id,
            queued_seconds=waited,
            user=getattr(job.tenant, "user", None),
            host_calls=host_calls,
            network=[r.to_dict() for r in job.network_requests],
            packages=job.packages_granted,
        )

    def session_event(self, event: str, live: SessionFacts | None, fields: dict[str, str]) -> None:
        if live is None:  # about a saved state, not a session: ``fields`` name the tenant
            self.audit.event(f"session_{event}", **fields)
            return
        self.audit.event(f"session_{event}", tenant=live.tenant, session=live.id,
                         profile=live.profile.name, **fields)  # fmt: skip

    def refused(self, code: str) -> None:
        """A run refused (``429``/``503``, by its stable code): counted in the metrics."""
        self.metrics.rejections.labels(code).inc()
