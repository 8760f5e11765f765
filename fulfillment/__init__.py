"""Fulfillment (SPEC 2): what an entitlement should look like on the panel,
how an operation to get it there is enqueued, and the operator's changes.
The worker that applies operations is jobs/fulfillment.py."""
