"""Periodic passes (SPEC 5): one module per pass, each a dispatcher that finds
work and inserts ordinary jobs for it (SPEC 5.3), never doing the slow work itself."""
