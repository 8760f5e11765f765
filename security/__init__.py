"""Keeping secrets secret: the redactor (SPEC 12.2)."""
