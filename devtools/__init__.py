"""Development mode (SPEC 0.4): the whole flow on one machine, with no external service."""
