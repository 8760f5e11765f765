"""Sustained queue benchmark: does the rate hold through a long burn-down?

    python -m bench.sustained [--jobs 1000000] [--systems omniflow-pg,huey-postgres]
                              [--rounds 1] [--workers 8] [--out PATH]

Each system burns down N preloaded no-op jobs (at least a million by default)
with W worker threads, the same procedure as ``bench.queue``
(``bench.harness.measure()``, one fresh subprocess per system and round),
without pickup probes. Before each system its table starts in the same state:
``jobs`` truncated (a fresh file), Huey's schema dropped and recreated; the
dead row versions it starts with are written in the JSON. The cluster's
autovacuum is left as it is configured and written in the JSON too: with it
off, nothing but the queue itself vacuums.

Figures: jobs/s over the whole burn-down, jobs/s per tenth of the jobs (the
first counted from the first job done, so start-up is not in it), and
``end_to_start`` = last tenth / first tenth. With several rounds (the order
rotating), the medians.
"""

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time

from bench import queue

DEFAULT_SYSTEMS = "omniflow-pg,huey-postgres"
DEFAULT_JOBS = 1_000_000
# A million jobs at a few hundred jobs/s on a busy machine, plus the preload.
BURN_TIMEOUT_S = 3600
SYSTEM_TIMEOUT_S = 5400
# The targets of the sustained burn-down with autovacuum off.
END_TO_START_AT_LEAST = 0.8
VS_HUEY_POSTGRES_AT_LEAST = 2.0

log = logging.getLogger("bench")


def autovacuum(dsn):
    """The cluster's autovacuum setting, 'on' or 'off'."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW autovacuum")
            return cur.fetchone()[0]
    finally:
        conn.close()


def summarise(rounds):
    """One system's figures over its rounds: medians, and every round beside them."""
    tenths = [r["tenths"] for r in rounds if r["tenths"]]
    ratios = [r["end_to_start"] for r in rounds if r["end_to_start"] is not None]
    return {
        "jobs_per_s": round(queue.median([r["jobs_per_s"] for r in rounds]), 1),
        "end_to_start": round(queue.median(ratios), 3) if ratios else None,
        "tenths": [round(queue.median(column), 1) for column in zip(*tenths)] if tenths else [],
        "start_dead_tuples": [r["start_dead_tuples"] for r in rounds],
        "end_dead_tuples": [r["end_dead_tuples"] for r in rounds],
        "rounds": rounds,
    }


def verdict(systems, autovacuum_setting):
    """The targets, met or not, as far as this run can say."""
    ours, huey = systems.get("omniflow-pg"), systems.get("huey-postgres")
    if ours is None:
        return {}
    out = {"end_to_start_at_least": END_TO_START_AT_LEAST,
           "end_to_start_met": ours["end_to_start"] is not None and ours["end_to_start"] >= END_TO_START_AT_LEAST}
    if huey is not None:
        out["vs_huey_postgres"] = round(ours["jobs_per_s"] / huey["jobs_per_s"], 3)
        out["vs_huey_postgres_at_least"] = VS_HUEY_POSTGRES_AT_LEAST
        out["vs_huey_postgres_met"] = out["vs_huey_postgres"] >= VS_HUEY_POSTGRES_AT_LEAST
    if autovacuum_setting != "off":
        out["note"] = "the targets are for autovacuum off; this run had it " + autovacuum_setting
    return out


def report(args, setting, per_system, errors, loads, dsn, t_start):
    """The JSON of the run so far."""
    systems = {name: summarise(rounds) for name, rounds in per_system.items() if rounds}
    for name in systems:
        if errors[name]:
            systems[name]["errors"] = errors[name]
    return {
        "jobs": args.jobs,
        "autovacuum": setting,
        "rounds": args.rounds,
        "workers": args.workers,
        "systems": systems,
        "failed": {name: errors[name] for name in per_system if name not in systems},
        "targets": verdict(systems, setting),
        "load_1min": queue.spread(loads, 2),
        "machine": queue.machine_info(dsn),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": round(time.monotonic() - t_start, 1),
    }


def run(args):
    t_start = time.monotonic()
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in queue.SYSTEMS]
    if unknown:
        sys.exit("unknown system(s): %s (known: %s)" % (", ".join(unknown), ", ".join(queue.SYSTEMS)))
    queue.ensure_peer_dependencies()
    dsn = args.pg_dsn or queue.bench_dsn()
    queue.ensure_database(dsn)
    setting = autovacuum(dsn)
    per_system = {name: [] for name in names}
    errors = {name: [] for name in names}
    loads = [queue.load_average()]
    tmpdir = tempfile.mkdtemp(prefix="omniflow-sustained-")
    try:
        for k in range(args.rounds):
            order = names[k % len(names):] + names[:k % len(names)]
            for name in order:
                load = queue.load_average()
                loads.append(load)
                log.info("round %d: %s, %d jobs (load %.2f, autovacuum %s)", k + 1, name, args.jobs, load, setting)
                result, error = queue.run_subprocess(
                    name, args, tmpdir, dsn, args.redis_url, args.jobs, 0,
                    timeout_s=SYSTEM_TIMEOUT_S, burn_timeout_s=BURN_TIMEOUT_S)
                if result is None:
                    errors[name].append("round %d: %s" % (k + 1, error))
                    log.error("%s: round %d: %s", name, k + 1, error)
                    continue
                result.update(round=k + 1, load_1min=load)
                per_system[name].append(result)
                log.info("%s: %.0f jobs/s, tenths %s, end_to_start %s",
                         name, result["jobs_per_s"], result["tenths"], result["end_to_start"])
                # Written after every measurement: a long run cut short keeps what it measured.
                data = report(args, setting, per_system, errors, loads + [queue.load_average()], dsn, t_start)
                queue.write_json(args.out, data)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    data = report(args, setting, per_system, errors, loads + [queue.load_average()], dsn, t_start)
    queue.write_json(args.out, data)
    systems = data["systems"]
    for name, figures in systems.items():
        print("%-14s %8.0f jobs/s  end_to_start %s  tenths %s"
              % (name, figures["jobs_per_s"], figures["end_to_start"], figures["tenths"]))
    print("autovacuum %s; targets %s" % (setting, data["targets"]))
    print("wrote %s" % args.out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.sustained", description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default=DEFAULT_SYSTEMS)
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="N no-op jobs per system and round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8, help="W consumer threads")
    parser.add_argument("--out", default=os.path.join("bench", "results", "sustained.json"))
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--redis-url", default=queue.DEFAULT_REDIS_URL)
    args = parser.parse_args(argv)
    # What run_subprocess passes on to each system's measurement (no probes here).
    args.probe_timeout, args.probe_budget = 15.0, 30.0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(processName)s %(message)s", datefmt="%H:%M:%S")
    run(args)


if __name__ == "__main__":
    main()
