"""Digital goods (SPEC 3, 15.4): what is sold beside plans, its delivery by a goods provider
(at most once per paid order), the schedule pass that finds due deliveries, and the operator's
resolution of the deliveries that need review."""
