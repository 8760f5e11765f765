"""The commerce passes (SPEC 5.1, 13.7, 13.8, 13.11), each a periodic job the leader enqueues:

    commerce_maintenance.py  1 min: expires pending orders and their intents, expired bonus credits, saved carts
    payment_reconcile.py     1 min: a `payment_poll` job for up to 100 intents pending longest (a dispatcher, 5.3)
    renewal.py               1 min (timeout 5 min): charges due renewals from the wallet, or a dunning notice
    lifecycle_sweep.py       5 min: expires gift cards and personal offers past their expiry

Each reads what is due through an index, works in bounded batches of short
transactions, checks `should_stop()` between them (a run past its timeout
returns and the next run carries on) and logs what it did.
"""
