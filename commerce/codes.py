"""Gift cards and access codes (SPEC 13.11): making them, and finding one by its code.

Only the SHA-256 of the normalised code is stored; the code itself is
returned once, to whoever made it. Normalising (capitals, no spaces or
dashes) lets a customer type `abcd efgh-…` for `ABCD-EFGH-…`. A generated
code has 16 characters from a 32-letter alphabet without look-alikes
(80 random bits), so its hash cannot be reversed by trying codes.

An operator revokes a card or code with a reason (`revoke`): `revoked_at`
is set once, and activations refuse it from then on.
"""

import hashlib
import secrets

from models.catalogue import AccessCode, GiftCard

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 16
GROUP = 4
MIN_CHOSEN_LENGTH = 6  # an operator may choose an access code, e.g. SPRING2027

INVALID_CODE = "invalid_code"
CODE_TAKEN = "code_taken"
INVALID_ACTIVATION_LIMIT = "invalid_activation_limit"
ALREADY_REVOKED = "already_revoked"


class CodeRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def new_code():
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return "-".join(raw[i : i + GROUP] for i in range(0, CODE_LENGTH, GROUP))


def normalise(code):
    return "".join(ch for ch in str(code).upper() if ch.isascii() and ch.isalnum())


def code_hash(code):
    return hashlib.sha256(normalise(code).encode()).hexdigest()


def issue_gift_card(plan, expires_at, purchase_order=None):
    """A new gift card for `plan`; returns (card, code) — the code is not kept anywhere."""
    code = new_code()
    card = GiftCard.create(code_hash=code_hash(code), plan=plan, purchase_order=purchase_order, expires_at=expires_at)
    return card, code


def issue_access_code(plan, max_activations, expires_at=None, code=None):
    """A new access code for `plan` (generated unless the operator chose one); returns (row, code)."""
    if isinstance(max_activations, bool) or not isinstance(max_activations, int) or max_activations < 1:
        raise CodeRejected(INVALID_ACTIVATION_LIMIT, "an access code allows at least one activation")
    code = new_code() if code is None else code
    if len(normalise(code)) < MIN_CHOSEN_LENGTH:
        raise CodeRejected(INVALID_CODE, f"a code has at least {MIN_CHOSEN_LENGTH} letters or digits")
    digest = code_hash(code)
    if AccessCode.select().where(AccessCode.code_hash == digest).exists():
        raise CodeRejected(CODE_TAKEN, "that code is already in use")
    row = AccessCode.create(code_hash=digest, plan=plan, max_activations=max_activations, expires_at=expires_at)
    return row, code


def find_gift_card(code):
    return GiftCard.get_or_none(GiftCard.code_hash == code_hash(code))


def find_access_code(code):
    return AccessCode.get_or_none(AccessCode.code_hash == code_hash(code))


def revoke(model, key, reason, now):
    """Revoke the gift card or access code `key` (`model` is GiftCard or AccessCode) with `reason`:
    it activates nothing after (commerce/activations.py). Returns the row; None when there is no such
    row; CodeRejected(ALREADY_REVOKED) when it was revoked already, or (a gift card) has been redeemed."""
    row = model.get_or_none(model.id == key)
    if row is None:
        return None
    if row.revoked_at is not None:
        raise CodeRejected(ALREADY_REVOKED, "this code has been revoked already")
    if model is GiftCard and row.status == "redeemed":
        raise CodeRejected(ALREADY_REVOKED, "this gift card has been redeemed: there is nothing left to revoke")
    changes = {"revoked_at": now, "revoked_reason": reason}
    if model is AccessCode:
        changes["active"] = False
    changed = model.update(**changes).where(model.id == key, model.revoked_at.is_null()).execute()
    if changed != 1:  # revoked meanwhile by another operator
        raise CodeRejected(ALREADY_REVOKED, "this code has been revoked already")
    return model.get_by_id(key)


def status_of(row, now):
    """What a card or code is now, in one word: revoked, redeemed, used up, expired or active."""
    if row.revoked_at is not None:
        return "revoked"
    if isinstance(row, GiftCard):
        if row.status == "redeemed":
            return "redeemed"
        return "expired" if row.status == "expired" or row.expires_at <= now else "active"
    if row.activation_count >= row.max_activations:
        return "used up"
    if not row.active:
        return "inactive"
    return "expired" if row.expires_at is not None and row.expires_at <= now else "active"
