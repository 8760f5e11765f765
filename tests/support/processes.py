"""Start, signal and watch real worker processes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HUEY_CONSUMER = str(Path(sys.executable).parent / "huey_consumer")


class WorkerProcesses:
    def __init__(self, database_url, log_dir):
        self.database_url = database_url
        self.log_dir = Path(log_dir)
        self.processes = []

    def start(self, *extra, env=None):
        """A test worker (tests/support/worker.py: the test job kinds declared)."""
        return self._spawn([sys.executable, "-m", "tests.support.worker", *extra], env)

    def start_huey_consumer(self, *options, env=None):
        """`huey_consumer omniflow.huey [options]`, Huey's own console script: the production worker."""
        return self._spawn([HUEY_CONSUMER, "omniflow.huey", *options], env)

    def _spawn(self, argv, env):
        index = len(self.processes)
        log = open(self.log_dir / f"worker-{index}.log", "w")
        env = dict(os.environ, DATABASE_URL=self.database_url, LOG_LEVEL="INFO", **(env or {}))
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        process.log_path = log.name
        self.processes.append(process)
        return process

    def logs(self):
        return "\n".join(f"--- {p.log_path} ---\n" + Path(p.log_path).read_text()[-4000:] for p in self.processes)

    def stop_all(self):
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.time() + 40
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_for(predicate, timeout, interval=0.2, message="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")
