"""Panel usernames (SPEC 2.7): derived from the subscription, so a retried
create finds the user it already made, and one customer can own several
independent panel users. Slot 1 of installations upgraded from v0.4 also
answers to the legacy name derived from the customer."""

import uuid

PREFIX = "omniflow_"


def _hex16(value):
    return uuid.UUID(str(value)).hex[:16]


def username_for(subscription_id):
    return PREFIX + _hex16(subscription_id)


def legacy_username_for(customer_id):
    return PREFIX + _hex16(customer_id)


def candidate_usernames(subscription_id, customer_id, slot):
    """Names to look up, in order. Slot ≥ 2 never falls back to the customer's name."""
    names = [username_for(subscription_id)]
    if slot == 1:
        names.append(legacy_username_for(customer_id))
    return names
