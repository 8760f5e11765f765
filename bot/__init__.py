"""The bot process (SPEC 14): one instance under a lease, updates applied at most once, and its loops."""
