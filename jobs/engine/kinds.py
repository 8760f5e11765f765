"""Queues, job kinds and their rules: queue, max attempts, uniqueness, timeout, backoff.

Uniqueness (SPEC 1.4) is "by args within a set of states": the unique key
(a digest of kind and canonical args) is held by a row only while its state
is in the kind's set. Every set contains all non-final states, so moving
between non-final states never gains or loses the key; only finishing can
release it, and only a retry of a finished job can need it back.
"""

import hashlib
import json
import random
from dataclasses import dataclass, field

from jobs.engine.states import COMPLETED, NON_FINAL_STATES, state_bits

QUEUES = {"critical": 16, "default": 8, "bulk": 4}
DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 25
PERIODIC_KIND = "periodic_task"
RAW_HUEY_KIND = "huey.message"

UNIQUE_WHILE_ACTIVE = NON_FINAL_STATES
UNIQUE_THROUGH_COMPLETED = NON_FINAL_STATES | {COMPLETED}


def river_backoff(attempt):
    """River's default: attempt⁴ seconds with ±10 % jitter (1 s, 16 s, 81 s, 256 s …)."""
    base = float(attempt**4)
    return max(1.0, base + base * random.uniform(-0.1, 0.1))


@dataclass(frozen=True)
class KindSpec:
    kind: str
    queue: str = DEFAULT_QUEUE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    unique_states: frozenset = field(default=frozenset())
    timeout_s: float = None
    priority: int = 0
    backoff: object = river_backoff
    task_class: object = None

    def __post_init__(self):
        if self.queue not in QUEUES:
            raise ValueError(f"job kind {self.kind}: unknown queue {self.queue!r}")
        if self.max_attempts < 1:
            raise ValueError(f"job kind {self.kind}: max_attempts must be at least 1")
        if self.unique_states and not NON_FINAL_STATES <= self.unique_states:
            raise ValueError(
                f"job kind {self.kind}: unique states must include every non-final state "
                f"({', '.join(sorted(NON_FINAL_STATES))})"
            )

    @property
    def unique_bits(self):
        return state_bits(self.unique_states)

    def unique_key(self, args):
        if not self.unique_states:
            return None
        return unique_digest(self.kind, args)


@dataclass(frozen=True)
class DeclaredWork:
    """What one worker process can run: its job kinds and its periodic passes (SPEC 1.11).

    Its claims take only these rows, and its heartbeat row names them, so the
    leader can tell which waiting rows no running worker will ever take."""

    kinds: tuple
    passes: tuple

    def pass_args(self):
        """The stored args of this worker's periodic passes' rows."""
        return [periodic_args(name) for name in self.passes]


def periodic_args(name):
    return canonical_args({"task": name})


def canonical_args(args):
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def unique_digest(kind, args):
    return hashlib.sha256(f"{kind}\x00{canonical_args(args)}".encode()).hexdigest()


class KindRegistry:
    def __init__(self):
        self._kinds = {}

    def register(self, spec):
        """Declare a kind; a kind known for inserting only (no task) may be declared once more with its task."""
        known = self._kinds.get(spec.kind)
        if known is not None and not (known.task_class is None and spec.task_class is not None):
            raise ValueError(f"job kind {spec.kind!r} is declared twice")
        self._kinds[spec.kind] = spec
        return spec

    def get(self, kind):
        spec = self._kinds.get(kind)
        if spec is None:
            raise KeyError(f"unknown job kind {kind!r}")
        return spec

    def __contains__(self, kind):
        return kind in self._kinds

    def __iter__(self):
        return iter(self._kinds.values())
