"""Sealing secrets at rest (SPEC 12.3, 15.1): AES-256-GCM under the keys of
APP_DATA_ENCRYPTION_KEY, and `SealedField`, the Peewee field of a sealed column.

A sealed value is text: `v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`.
The key id (8 hex characters derived from the key, never the key) says which
key sealed it, so unsealing goes straight to that key, and `keys rotate`
finds the values not yet under the newest key in SQL, without decrypting
anything. The column's name (`table.column`) is the associated data: a value
copied into another sealed column does not unseal there.

APP_DATA_ENCRYPTION_KEY holds one or more keys, newest first, separated by
commas; each is 32 random bytes in base64 (`python omniflow.py keys generate`).
New values are sealed with the first; any listed key unseals.

A row's sealed attribute unseals when it is read (`destination.secret`); a
value that cannot be unsealed raises UnsealError naming the column and the
row, never the value. Rows read as tuples or dicts carry SealedValue objects:
`unseal(value, field.context, row_id)` opens them.
"""

import base64
import binascii
import hashlib
import hmac
import os
import re
import threading

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from peewee import FieldAccessor, TextField

VARIABLE = "APP_DATA_ENCRYPTION_KEY"
VERSION = "v1"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_LABEL = b"omniflow sealing key id"
_KEY_ID = re.compile(r"[0-9a-f]{8}")

# Why a value could not be unsealed: the only texts an UnsealError carries.
NO_KEY = f"{VARIABLE} is not set"
UNKNOWN_KEY = "it was sealed with key {key_id}, which " + VARIABLE + " does not hold"
NOT_AUTHENTIC = "it does not authenticate under key {key_id} (a wrong key, or the value was altered)"
NOT_SEALED = "it is not a sealed value"


class KeyFormatError(ValueError):
    """APP_DATA_ENCRYPTION_KEY is malformed; the message says how, never what it holds."""


class SealingUnavailable(Exception):
    """Nothing can be sealed: APP_DATA_ENCRYPTION_KEY is not set."""

    def __init__(self):
        super().__init__(f"{VARIABLE} is not set: secrets cannot be sealed")


class UnsealError(Exception):
    """A stored value could not be unsealed; names the column and row, never the value."""

    def __init__(self, context, row_id, reason):
        where = context if row_id is None else f"{context} of row {row_id}"
        super().__init__(f"cannot unseal {where}: {reason}")
        self.context = context
        self.row_id = row_id
        self.reason = reason


def generate_key():
    """A new key in the form APP_DATA_ENCRYPTION_KEY takes."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode()


def parse_keys(text):
    """The keys of APP_DATA_ENCRYPTION_KEY, newest first; () when unset. Raises KeyFormatError."""
    entries = [entry.strip() for entry in (text or "").split(",")]
    if entries == [""]:
        return ()
    keys = []
    for position, entry in enumerate(entries, start=1):
        which = f"key {position} of {len(entries)}"
        if not entry:
            raise KeyFormatError(f"{which} is empty (keys are separated by single commas)")
        try:
            key = base64.b64decode(entry.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != KEY_BYTES:
            raise KeyFormatError(
                f"{which} is not {KEY_BYTES} bytes of base64 (make one with `python omniflow.py keys generate`)"
            )
        if key in keys:
            raise KeyFormatError(f"{which} repeats an earlier key")
        keys.append(key)
    return tuple(keys)


def key_id(key):
    return hmac.new(key, KEY_ID_LABEL, hashlib.sha256).hexdigest()[:8]


class Keyring:
    """The configured keys: seal with the newest, unseal with whichever sealed the value."""

    def __init__(self, keys):
        if not keys:
            raise ValueError("a keyring needs at least one key")
        self._ciphers = {key_id(key): AESGCM(key) for key in keys}
        self.newest_id = key_id(keys[0])
        self.key_ids = tuple(key_id(key) for key in keys)

    @property
    def current_prefix(self):
        """How every value sealed with the newest key begins."""
        return f"{VERSION}:{self.newest_id}:"

    def seal(self, plaintext, context):
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.newest_id].encrypt(nonce, plaintext.encode(), context.encode())
        return self.current_prefix + base64.urlsafe_b64encode(nonce + sealed).decode()

    def unseal(self, value, context, row_id=None):
        version, _, rest = value.partition(":")
        value_key_id, _, body = rest.partition(":")
        if version != VERSION or not body or not _KEY_ID.fullmatch(value_key_id):
            raise UnsealError(context, row_id, NOT_SEALED)
        cipher = self._ciphers.get(value_key_id)
        if cipher is None:
            raise UnsealError(context, row_id, UNKNOWN_KEY.format(key_id=value_key_id))
        try:
            raw = base64.urlsafe_b64decode(body.encode())
            return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode()).decode()
        except (InvalidTag, binascii.Error, ValueError):
            raise UnsealError(context, row_id, NOT_AUTHENTIC.format(key_id=value_key_id)) from None


_keyring = None
_keyring_lock = threading.Lock()


def use_keys(text):
    """Configure this process's keys from APP_DATA_ENCRYPTION_KEY's text (None or "" for none)."""
    global _keyring
    keys = parse_keys(text)
    with _keyring_lock:
        _keyring = Keyring(keys) if keys else None


def keyring():
    """This process's keyring; SealingUnavailable without keys."""
    ring = _keyring
    if ring is None:
        raise SealingUnavailable()
    return ring


def available():
    return _keyring is not None


def seal(plaintext, context):
    return keyring().seal(plaintext, context)


def unseal(value, context, row_id=None):
    """Open a stored value (text or SealedValue) of the column `context`."""
    if value is None:
        return None
    text = value.text if isinstance(value, SealedValue) else value
    ring = _keyring
    if ring is None:
        raise UnsealError(context, row_id, NO_KEY)
    return ring.unseal(text, context, row_id)


class SealedValue:
    """A value as stored in a sealed column, not yet unsealed; shows nothing of itself."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, SealedValue) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return "<sealed>"

    __str__ = __repr__


class SealedAccessor(FieldAccessor):
    """Reading the attribute unseals, naming the row if it cannot."""

    def __get__(self, instance, instance_type=None):
        if instance is None:
            return self.field
        value = instance.__data__.get(self.name)
        if isinstance(value, SealedValue):
            return unseal(value, self.field.context, instance._pk)
        return value


_columns = {}
_columns_lock = threading.Lock()


class SealedField(TextField):
    """A text column that holds sealed values: a plaintext string is sealed on
    write, a stored value unsealed on attribute read (SealedValue until then)."""

    accessor_class = SealedAccessor

    def bind(self, model, name, set_attribute=True):
        super().bind(model, name, set_attribute)
        with _columns_lock:
            _columns[self.context] = self

    @property
    def context(self):
        return f"{self.model._meta.table_name}.{self.column_name}"

    def db_value(self, value):
        if value is None:
            return None
        if isinstance(value, SealedValue):
            return value.text
        return seal(value, self.context)

    def python_value(self, value):
        return None if value is None else SealedValue(value)


def sealed_columns():
    """Every sealed column of every model defined in this process, by `table.column`."""
    with _columns_lock:
        return [field for _, field in sorted(_columns.items())]
