"""Numbers and codes fixed by SPEC 2.21 and 2.22: no environment variable changes them."""

RECONCILE_INTERVAL_S = 15 * 60
RECONCILE_BATCH = 500
# An entitlement the previous run checked was reconciled a little *less* than one interval ago; counting it
# due only after a full interval would check each one every other run. Its reconciles have this long to finish.
RECONCILE_DUE_AFTER_S = RECONCILE_INTERVAL_S - 5 * 60
RECONCILE_HORIZON_DAYS = 30
REVIVE_INTERVAL_S = 5 * 60
REVIVE_IDLE_S = 10 * 60
REVIVE_BATCH = 500
QUEUE_ATTEMPTS = 12
BACKOFF_BASE_S = 5
BACKOFF_MAX_EXPONENT = 8  # 5 s × 2^8 = 1280 s cap
NOTICE_AFTER_ATTEMPTS = 3
MAINTENANCE_PAUSE_S = 60
CLAIM_LEASE_S = 120

# Error and cancellation codes stored in last_error_code (never free text).
ENTITLEMENT_SUPERSEDED = "entitlement_superseded"
ORDER_REFUNDED = "order_refunded"
ORDER_NOT_PAID = "order_not_paid"
UNSUPPORTED_OPERATION = "unsupported_operation"
INVALID_DESIRED_STATE = "invalid_desired_state"
MAINTENANCE_ACTIVE = "maintenance_active"
REMOTE_USER_NOT_FOUND = "remote_user_not_found"
REMNAWAVE_UNAVAILABLE = "remnawave_unavailable"
INTERNAL_ERROR = "internal_error"
LEASE_EXPIRED = "lease_expired"  # a run claimed the operation and never recorded (it died)
NOT_PROVISIONED = "not_provisioned"  # its entitlement's create ended without provisioning anything

NOTICE_FULFILLMENT_FAILURE = "fulfillment_failure"
NOTICE_ORDER_PAID = "order_paid"
NOTICE_CUSTOMER_ACCESS_READY = "access_ready"  # to the customer, by the bot: their create succeeded
NOTICE_CUSTOMER_ACCESS_RENEWED = "access_renewed"  # instead, when the create was a renewal's: the link is unchanged


def backoff_seconds(attempt):
    """5 s × 2^min(attempt, 8): 10 s, 20 s, 40 s … 1280 s."""
    return BACKOFF_BASE_S * 2 ** min(attempt, BACKOFF_MAX_EXPONENT)

OPERATOR_CANCELLED = "operator_cancelled"  # an operator cancelled it from the panel (SPEC 4.2)
