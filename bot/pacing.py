"""A token bucket shared by the threads that send: at most `rate` sends per second, evenly spaced.

The capacity is two tokens by default, so sends are spread 1/rate apart
rather than bunched at the start of each second: Telegram counts messages
per second, and a burst of 25 in 50 ms is what draws its 429s. The second
token is the slack for a sender that wakes late (a loaded machine oversleeps
every wait by a few milliseconds): with room for one token only, each late
wake-up would be time lost for good and the rate would fall below the
setting; with two, the next send catches it up. `pause(s)`
(a 429's retry_after) holds every taker until it has passed and leaves the
bucket empty, so the time waited is not spent as a burst the moment it ends.
"""

import threading
import time


class TokenBucket:
    def __init__(self, rate, capacity=2.0, clock=time.monotonic):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self.clock = clock
        self.tokens = self.capacity
        self.updated = clock()
        self.paused_until = 0.0
        self._lock = threading.Lock()

    def _wait_needed(self):
        """Under the lock: take a token and return 0, or return how long to wait before trying again."""
        now = self.clock()
        if now < self.paused_until:
            return self.paused_until - now
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0
        return (1 - self.tokens) / self.rate

    def take(self, stop=None):
        """Wait for a token and take it; False when `stop` (a threading.Event) was set meanwhile."""
        stop = stop or threading.Event()
        while True:
            with self._lock:
                wait = self._wait_needed()
            if not wait:
                return True
            if stop.wait(wait):
                return False

    def pause(self, seconds):
        with self._lock:
            now = self.clock()
            self.paused_until = max(self.paused_until, now + seconds)
            self.tokens = 0.0
            self.updated = self.paused_until
