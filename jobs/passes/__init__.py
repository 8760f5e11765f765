"""Periodic passes (SPEC 5): one module per pass. Most are dispatchers that find
work and insert ordinary jobs for it (SPEC 5.3), never doing the slow work
themselves; the housekeeping passes (retention, backup) do their own work in
bounded steps and check `current_job().should_stop()` between them."""
