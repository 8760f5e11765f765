"""Job states (SPEC 1.5), the bits that encode uniqueness sets, and the
operator rules for retry and cancel (River's: cancel any non-final job,
retry any job that is not running)."""

AVAILABLE = "available"
SCHEDULED = "scheduled"
RUNNING = "running"
RETRYABLE = "retryable"
COMPLETED = "completed"
DISCARDED = "discarded"
CANCELLED = "cancelled"
PENDING = "pending"

ALL_STATES = (AVAILABLE, SCHEDULED, RUNNING, RETRYABLE, COMPLETED, DISCARDED, CANCELLED, PENDING)
FINAL_STATES = frozenset({COMPLETED, DISCARDED, CANCELLED})
NON_FINAL_STATES = frozenset(set(ALL_STATES) - FINAL_STATES)
# The states a worker can claim from once scheduled_at has passed.
CLAIMABLE_STATES = (AVAILABLE, SCHEDULED, RETRYABLE)
# The dead-letter view: jobs that ended without completing.
DEAD_LETTER_STATES = (DISCARDED, CANCELLED)

STATE_BITS = {state: 1 << index for index, state in enumerate(ALL_STATES)}


def state_bits(states):
    mask = 0
    for state in states:
        mask |= STATE_BITS[state]
    return mask


class JobMutationRejected(Exception):
    """The job's current state forbids the requested change (an API maps it to 422)."""

    code = "job_mutation_rejected"

    def __init__(self, job_id, state, action, detail=None):
        super().__init__(detail or f"job {job_id} is {state}; {action} is not allowed in that state")
        self.job_id = job_id
        self.state = state
        self.action = action


class JobNotFound(Exception):
    code = "job_not_found"

    def __init__(self, job_id):
        super().__init__(f"job {job_id} does not exist")
        self.job_id = job_id


def can_cancel(state):
    return state not in FINAL_STATES


def can_retry(state):
    return state != RUNNING
