"""Operator passwords as slow salted hashes (scrypt, from `cryptography`).

Stored as `scrypt$<n>$<r>$<p>$<salt>$<hash>` (base64), so the cost can be
raised later without invalidating existing hashes.
"""

import base64
import os

from cryptography.exceptions import InvalidKey
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

SCHEME = "scrypt"
N, R, P = 2**14, 8, 1  # about 16 MiB and tens of milliseconds per hash
LENGTH = 32
MIN_LENGTH = 12


class WeakPassword(ValueError):
    pass


def hash_password(password):
    if len(password) < MIN_LENGTH:
        raise WeakPassword(f"a password needs at least {MIN_LENGTH} characters")
    salt = os.urandom(16)
    digest = Scrypt(salt=salt, length=LENGTH, n=N, r=R, p=P).derive(password.encode())
    return "$".join((SCHEME, str(N), str(R), str(P), _b64(salt), _b64(digest)))


def verify_password(password, stored):
    """True when `password` matches; constant-time in the digest comparison."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return False
        Scrypt(salt=_unb64(salt), length=LENGTH, n=int(n), r=int(r), p=int(p)).verify(password.encode(), _unb64(digest))
    except (ValueError, InvalidKey):
        return False
    return True


# Hashed when the username is unknown, so a wrong name costs as long as a wrong password.
DECOY_HASH = "$".join((SCHEME, str(N), str(R), str(P), "AAAAAAAAAAAAAAAAAAAAAA==", "A" * 43 + "="))


def _b64(raw):
    return base64.b64encode(raw).decode()


def _unb64(text):
    return base64.b64decode(text.encode(), validate=True)
