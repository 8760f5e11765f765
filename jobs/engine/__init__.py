"""The durable queue engine: River's guarantees behind Huey's API.

Map of the package (read in this order):
  states.py      job states, the state bits behind uniqueness, operator-rule errors
  kinds.py       queues and their concurrency, job kind declarations, backoff
  sql.py         the hot-path SQL, written once; the two dialects' differences in small
                 classes at its end, and `for_database` picks one for the bound database
  client.py      insert (transactional, unique), retry, cancel, listings
  storage.py     the Huey storage over the same tables (Huey's own contract)
  notifier.py    wake-ups: LISTEN/NOTIFY on PostgreSQL, in-process events
  executor.py    producers (batch claim), the completer (batched outcomes), running a job
  outage.py      backing off through a database outage, rate-limited failures, the bound
  schedules.py   when a periodic pass is due: every(...) and Huey's crontab(...)
  maintenance.py heartbeat, leader election, periodic enqueue, rescue, cleaner
  consumer_options.py  what huey_consumer's options mean here (or why one is refused)
  huey_app.py    OmniflowHuey and its Consumer/Worker/Scheduler
  metrics.py     omniflow_jobs_total and omniflow_job_duration_seconds
"""
