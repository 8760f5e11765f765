"""Operational records written beside business changes: notices, audit, outbox, maintenance."""
