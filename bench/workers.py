"""Many workers on one PostgreSQL: does the queue's throughput grow with worker processes?

    python -m bench.workers [--processes 1,2,4] [--jobs 20000] [--rounds 3]
                            [--workers 8] [--out PATH]

One measurement: the omniflow-pg table starts empty (TRUNCATE, as in
``bench.queue``), N no-op jobs are preloaded, then P worker processes (each
the real consumer with W worker threads, forked before anything is opened)
burn them down together. The clock runs from the moment they are told to
start to the N-th no-op body; ``jobs_per_s = N / elapsed``, and every body
counts itself in shared memory so the run checks that exactly N ran.

Beside the rate, where the time went: the CPU seconds the worker processes
and the bench database's server processes spent during the burn (from
/proc), as a share of the machine's cores, and per job; and how busy every
core was meanwhile, whoever kept it busy (/proc/stat). When the cores are
all busy and the CPU per job does not change with the process count, another
process only divides the same cores.

Rounds interleave the process counts (the order rotating), each measurement
in a fresh interpreter; the figures are medians, with each count's ratio to
the 1-process median.
"""

import argparse
import json
import logging
import os
import subprocess
import sys
import time

from bench import harness, queue

DEFAULT_PROCESSES = "1,2,4"
DEFAULT_JOBS = 20_000
BURN_TIMEOUT_S = 300
MEASUREMENT_TIMEOUT_S = 420
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

log = logging.getLogger("bench")


def cpu_seconds(pid):
    """User + system CPU seconds a process has spent so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_busy():
    """(busy, total) CPU ticks of the whole machine so far, every core and every process (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def server_pids(dsn):
    """The server processes of the bench database's connections now (its backends)."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return [row[0] for row in cur.fetchall()]
    finally:
        conn.close()


def measure(processes, jobs, workers, dsn, tmpdir):
    """Burn down `jobs` no-op jobs with `processes` consumer processes; the figures of that one burn."""
    from bench.systems.omniflow_engine import OmniflowSystem

    ctx = harness.Context(pg_dsn=dsn, tmpdir=tmpdir, jobs=jobs, workers=workers, probes=0)
    system = OmniflowSystem("omniflow-pg", ctx)
    harness._init_shared(jobs, 0)
    go, stop = harness._mp.Event(), harness._mp.Event()
    children = [
        harness._mp.Process(target=harness._consumer_child, args=(system, workers, go, stop), name=f"worker-{i + 1}")
        for i in range(processes)
    ]
    # Forked before prepare(): the parent holds no connection or thread yet.
    for child in children:
        child.start()
    try:
        system.prepare()
        system.enqueue_noops(jobs)
        worker_cpu_before = sum(cpu_seconds(child.pid) for child in children)
        busy_before, total_before = machine_busy()
        started = time.time()
        go.set()
        deadline = time.monotonic() + BURN_TIMEOUT_S
        while harness._jobs_done.value < jobs:
            if not all(child.is_alive() for child in children):
                raise harness.BenchError(f"a worker process exited after {harness._jobs_done.value} of {jobs} jobs")
            if time.monotonic() > deadline:
                raise harness.BenchError(f"timed out with {harness._jobs_done.value} of {jobs} jobs done")
            time.sleep(0.005)
        elapsed = harness._burn_end.value - started
        # Read before the workers stop: a server process's CPU time is gone with its connection.
        worker_cpu = sum(cpu_seconds(child.pid) for child in children) - worker_cpu_before
        server_cpu = sum(cpu_seconds(pid) for pid in server_pids(dsn))
        busy_after, total_after = machine_busy()
    finally:
        for child in children:
            harness._stop_child(child, stop)
        system.close()
    executed = harness._jobs_done.value
    cores = os.cpu_count()
    return {
        "processes": processes,
        "jobs_per_s": round(jobs / elapsed, 1),
        "burn_down_s": round(elapsed, 3),
        "executed": executed,
        "worker_cpu_s": round(worker_cpu, 2),
        "server_cpu_s": round(server_cpu, 2),
        # Share of all the machine's cores the workers and their server processes kept busy.
        "worker_cpu_share": round(worker_cpu / elapsed / cores, 3),
        "server_cpu_share": round(server_cpu / elapsed / cores, 3),
        # CPU the queue spends per job, worker and server together: what a core buys.
        "cpu_ms_per_job": round((worker_cpu + server_cpu) * 1000 / jobs, 3),
        # How busy every core was meanwhile, whoever kept it busy (the machine is shared).
        "machine_busy_share": round((busy_after - busy_before) / max(1, total_after - total_before), 3),
        "notes": "" if executed == jobs else f"executed {executed} no-op jobs, expected {jobs}",
    }


def run_one(args):
    result = measure(args.one, args.jobs, args.workers, args.pg_dsn, args.tmpdir)
    print(queue.RESULT_PREFIX + json.dumps(result), flush=True)


def run_subprocess(processes, args, dsn):
    cmd = [
        sys.executable,
        "-m",
        "bench.workers",
        "--one",
        str(processes),
        "--jobs",
        str(args.jobs),
        "--workers",
        str(args.workers),
        "--pg-dsn",
        dsn,
        "--tmpdir",
        args.tmpdir or "/tmp",
    ]
    try:
        done = subprocess.run(cmd, cwd=queue.ROOT, stdout=subprocess.PIPE, text=True, timeout=MEASUREMENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {MEASUREMENT_TIMEOUT_S} s"
    for line in done.stdout.splitlines():
        if line.startswith(queue.RESULT_PREFIX):
            return json.loads(line[len(queue.RESULT_PREFIX) :]), None
    return None, f"exit code {done.returncode}, no result (see stderr above)"


def summarise(counts, per_count):
    """Medians per process count, and each count's ratio to the 1-process median."""
    systems = {}
    for count in counts:
        rounds = per_count[count]
        if not rounds:
            continue
        systems[str(count)] = {
            "jobs_per_s": queue.spread([r["jobs_per_s"] for r in rounds]),
            "worker_cpu_share": round(queue.median([r["worker_cpu_share"] for r in rounds]), 3),
            "server_cpu_share": round(queue.median([r["server_cpu_share"] for r in rounds]), 3),
            "machine_busy_share": round(queue.median([r["machine_busy_share"] for r in rounds]), 3),
            "cpu_ms_per_job": round(queue.median([r["cpu_ms_per_job"] for r in rounds]), 3),
            "rounds": rounds,
        }
    base = systems.get("1")
    for figures in systems.values():
        if base:
            figures["vs_1_process"] = round(figures["jobs_per_s"]["median"] / base["jobs_per_s"]["median"], 2)
    return systems


def run(args):
    t_start = time.monotonic()
    counts = [int(c) for c in args.processes.split(",") if c.strip()]
    dsn = args.pg_dsn or queue.bench_dsn()
    queue.ensure_database(dsn)
    per_count = {count: [] for count in counts}
    errors = []
    loads = [queue.load_average()]
    data = {}
    for k in range(args.rounds):
        order = counts[k % len(counts) :] + counts[: k % len(counts)]
        for count in order:
            load = queue.load_average()
            loads.append(load)
            log.info(
                "round %d: %d process(es) x %d threads, %d jobs (load %.2f)",
                k + 1,
                count,
                args.workers,
                args.jobs,
                load,
            )
            result, error = run_subprocess(count, args, dsn)
            if result is None:
                errors.append(f"round {k + 1}, {count} process(es): {error}")
                log.error("%s", errors[-1])
                continue
            result.update(round=k + 1, load_1min=load)
            per_count[count].append(result)
            log.info(
                "%d process(es): %.0f jobs/s, workers %.0f%% and server %.0f%% of the cores (all busy %.0f%%)",
                count,
                result["jobs_per_s"],
                100 * result["worker_cpu_share"],
                100 * result["server_cpu_share"],
                100 * result["machine_busy_share"],
            )
            data = {
                "jobs": args.jobs,
                "workers_per_process": args.workers,
                "rounds": args.rounds,
                "processes": summarise(counts, per_count),
                "errors": errors,
                "load_1min": queue.spread(loads + [queue.load_average()], 2),
                "machine": queue.machine_info(dsn),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "wall_s": round(time.monotonic() - t_start, 1),
            }
            queue.write_json(args.out, data)
    for count, figures in data.get("processes", {}).items():
        print(
            f"{count} process(es): median {figures['jobs_per_s']['median']:.0f} jobs/s "
            f"({figures.get('vs_1_process')}x 1 process), workers {figures['worker_cpu_share']:.0%} "
            f"and server {figures['server_cpu_share']:.0%} of {os.cpu_count()} cores, "
            f"all of them busy {figures['machine_busy_share']:.0%}; {figures['cpu_ms_per_job']} ms CPU per job"
        )
    print(f"wrote {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.split("\n")[0])
    parser.add_argument("--processes", default=DEFAULT_PROCESSES, help="worker process counts, e.g. 1,2,4")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="N no-op jobs per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8, help="W worker threads per process")
    parser.add_argument("--out", default=os.path.join("bench", "results", "workers.json"))
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tmpdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(processName)s %(message)s", datefmt="%H:%M:%S"
    )
    if args.one:
        run_one(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
