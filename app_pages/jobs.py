"""The job queue every visitor's heavy work goes through: a global cap, one running job per
visitor, a bounded waiting list, a place in the queue with an estimate, identical requests sharing
one job.

Not a page; no Streamlit (``app_pages.running`` draws the queue and runs the work): plain
threads, so the rules are tested without a server.

- **The caps**: at most ``$ELMO_WORKBENCH_MAX_JOBS`` jobs run at once (default: the machine's
  cores; app.py runs torch on one intra-op thread, so jobs x threads stays at the cores), and at
  most ``$ELMO_WORKBENCH_JOBS_PER_VISITOR`` (1) per visitor:
  a browser, however many tabs it opens (the app names visitors; a tab is its own visitor where
  nothing names it); the others wait in order of arrival. A job whose visitor already runs one
  waits without holding up the jobs behind it.
- **The waiting list is bounded**: at most :data:`WAITING_PER_SLOT` jobs per running slot wait in
  all, and at most :data:`WAITING_PER_VISITOR` of one visitor; a request past either is refused in
  one line (:class:`QueueFull`), before it waits.
- **Sharing**: a request whose key equals that of a job queued or running joins it: one job, its
  value handed to everyone who asked.
- **Leaving**: a job is abandoned when every session that asked for it has gone
  (:meth:`JobQueue.abandoned`); the running side then stops it and removes its partial files.
  (Streamlit also stops the script of a tab that closes: when the tab running a shared job
  closes, the job ends cancelled and a tab still waiting for it asks again and runs it, from
  the caches the first run wrote.)
- **The estimate**: from how long finished jobs of the same kind took on this server (the last
  20 of each); none until one has finished.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_JOBS_ENV_VAR = "ELMO_WORKBENCH_MAX_JOBS"
PER_SESSION_ENV_VAR = "ELMO_WORKBENCH_JOBS_PER_VISITOR"
#: Jobs that may wait, per running slot, before a new request is refused.
WAITING_PER_SLOT = 8
#: Jobs one visitor may have waiting (beside those running).
WAITING_PER_VISITOR = 4
_counter = itertools.count(1)


class QueueFull(ValueError):
    """A request refused because the waiting list (the server's, or the visitor's share) is full."""


@dataclass(eq=False)
class Job:
    """One piece of work: ``kind`` (for the estimate), ``key`` (None: never shared), the session
    that runs it (``owner``) and those that wait for its value (``watchers``)."""

    kind: str
    key: str | None
    owner: str
    title: str = ""
    visitor: str = ""  # who the caps count it against ("": the owner session)
    watchers: set[str] = field(default_factory=set)
    number: int = field(default_factory=lambda: next(_counter))
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    state: str = "queued"  # queued, running, done, failed, cancelled
    value: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.visitor = self.visitor or self.owner

    def sessions(self) -> set[str]:
        """Every session that asked for this job."""
        return {self.owner} | self.watchers


def _setting(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: give a whole number of at least 1") from None
    if value < 1:
        raise ValueError(f"{name}={text!r}: give a whole number of at least 1")
    return value


class JobQueue:
    """The queue (thread-safe). ``max_running``: jobs at once; ``per_session``: jobs at once of
    one visitor; ``max_waiting``: jobs waiting in all (default :data:`WAITING_PER_SLOT` per slot);
    ``per_visitor_waiting``: jobs waiting of one visitor."""

    def __init__(self, max_running: int, per_session: int = 1, max_waiting: int | None = None,
                 per_visitor_waiting: int = WAITING_PER_VISITOR) -> None:
        if max_running < 1 or per_session < 1:
            raise ValueError(f"a job queue needs caps of at least 1, got {max_running} and {per_session}")
        self.max_running, self.per_session = max_running, per_session
        self.max_waiting = WAITING_PER_SLOT * max_running if max_waiting is None else max_waiting
        self.per_visitor_waiting = per_visitor_waiting
        self._lock = threading.Condition()
        self._queued: list[Job] = []
        self._running: list[Job] = []
        self._by_key: dict[str, Job] = {}
        self._durations: dict[str, deque] = defaultdict(lambda: deque(maxlen=20))

    # -- asking ---------------------------------------------------------------------------
    def submit(self, kind: str, key: str | None, session: str, title: str = "",
               visitor: str = "") -> tuple[Job, bool]:
        """The job for this request and whether it is shared (another session's job with the same
        key, queued or running, which this Streamlit session (this tab) now waits for). ``visitor``:
        who the caps count a new job against (default: the session). Raises :class:`QueueFull`
        when a new job would wait past the server's or the visitor's bound (joining a job never
        does)."""
        with self._lock:
            job = self._by_key.get(key) if key is not None else None
            if job is not None and job.state in ("queued", "running"):
                if session != job.owner:
                    job.watchers.add(session)
                return job, session != job.owner
            visitor = visitor or session
            if len(self._queued) >= self.max_waiting:
                raise QueueFull(f"the server is busy: {len(self._queued)} jobs are waiting for its "
                                f"{self.max_running} slot{'s' if self.max_running != 1 else ''}; try again "
                                "in a few minutes")
            if sum(1 for j in self._queued if j.visitor == visitor) >= self.per_visitor_waiting:
                raise QueueFull(f"you have {self.per_visitor_waiting} jobs waiting on this server already; "
                                "wait for one of them to start (or close the tabs that asked for them)")
            job = Job(kind, key, session, title, visitor=visitor)
            self._queued.append(job)
            if key is not None:
                self._by_key[key] = job
            self._lock.notify_all()
            return job, False

    def try_start(self, job: Job) -> bool:
        """Start ``job`` if the caps allow it and no earlier job that could run is waiting."""
        with self._lock:
            if job.state == "running":
                return True
            if job.state != "queued" or len(self._running) >= self.max_running:
                return False
            for other in self._queued:
                if self._visitor_running(other.visitor) >= self.per_session:
                    continue  # that visitor waits for its own job; it holds nobody up
                if other is not job:
                    return False
                self._queued.remove(job)
                self._running.append(job)
                job.state, job.started_at = "running", time.monotonic()
                return True
            return False

    def _visitor_running(self, visitor: str) -> int:
        return sum(1 for j in self._running if j.visitor == visitor)

    # -- ending ---------------------------------------------------------------------------
    def finish(self, job: Job, value: Any = None, error: BaseException | None = None, cancelled: bool = False) -> None:
        """Record how ``job`` ended (its value, its error, or cancelled) and wake its watchers."""
        with self._lock:
            if job in self._queued:
                self._queued.remove(job)
            if job in self._running:
                self._running.remove(job)
            if job.key is not None and self._by_key.get(job.key) is job:
                del self._by_key[job.key]
            job.state = "cancelled" if cancelled else "failed" if error is not None else "done"
            job.value, job.error = value, error
            if job.state == "done" and job.started_at is not None:
                self._durations[job.kind].append(time.monotonic() - job.started_at)
            job.finished.set()
            self._lock.notify_all()

    def leave(self, job: Job, session: str) -> None:
        """``session`` no longer waits for ``job`` (its tab closed)."""
        with self._lock:
            job.watchers.discard(session)

    def abandoned(self, job: Job, connected: Callable[[str], bool]) -> bool:
        """Whether every session that asked for ``job`` has gone (``connected(session)`` is False)."""
        with self._lock:
            sessions = job.sessions()
        return not any(connected(s) for s in sessions)

    def wait(self, timeout: float) -> None:
        """Sleep until the queue changes, at most ``timeout`` seconds."""
        with self._lock:
            self._lock.wait(timeout)

    # -- telling --------------------------------------------------------------------------
    def position(self, job: Job) -> int:
        """``job``'s place among the waiting jobs (1: next); 0 once it runs or ended."""
        with self._lock:
            return self._queued.index(job) + 1 if job in self._queued else 0

    def counts(self) -> tuple[int, int]:
        """(jobs running, jobs waiting)."""
        with self._lock:
            return len(self._running), len(self._queued)

    def typical_seconds(self, kind: str) -> float | None:
        """The median time of the finished jobs of ``kind`` (None before the first)."""
        with self._lock:
            return self._median(kind)

    def eta(self, job: Job) -> float | None:
        """Seconds until ``job`` starts, from the typical times of the jobs running and the jobs
        ahead of it (each slot frees when its job's typical time has passed); None while a kind
        involved has no finished job to go by."""
        with self._lock:
            if job not in self._queued:
                return 0.0
            now = time.monotonic()
            slots = []
            for running in self._running:
                typical = self._median(running.kind)
                if typical is None:
                    return None
                slots.append(max(0.0, typical - (now - (running.started_at or now))))
            slots += [0.0] * max(0, self.max_running - len(slots))
            slots.sort()
            for ahead in self._queued[:self._queued.index(job)]:
                typical = self._median(ahead.kind)
                if typical is None:
                    return None
                start = slots.pop(0)
                slots.append(start + typical)
                slots.sort()
            return slots[0]

    def _median(self, kind: str) -> float | None:
        times = sorted(self._durations.get(kind, ()))
        return times[len(times) // 2] if times else None


_QUEUE: JobQueue | None = None
_QUEUE_LOCK = threading.Lock()


def job_queue() -> JobQueue:
    """The server's one queue, made on first use from ``$ELMO_WORKBENCH_MAX_JOBS`` (default: the
    machine's cores) and ``$ELMO_WORKBENCH_JOBS_PER_VISITOR`` (default 1). ValueError naming the
    variable for a value that is no whole number of at least 1."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            _QUEUE = JobQueue(_setting(MAX_JOBS_ENV_VAR, os.cpu_count() or 1), _setting(PER_SESSION_ENV_VAR, 1))
        return _QUEUE



def reset_job_queue() -> None:
    """Forget the queue (the next :func:`job_queue` reads the settings again); for tests and hosts."""
    global _QUEUE
    with _QUEUE_LOCK:
        _QUEUE = None
