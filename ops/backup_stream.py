"""The encrypted backup file format: a chunked AES-256-GCM stream (version 2).

    header  MAGIC (8) | version (1) | key id (8) | salt (16) | chunk size (4) | header check (8)
    chunk   word (4) | AES-GCM ciphertext and tag of at most `chunk size` bytes

Integers are big-endian; a chunk's word is its ciphertext length, with the
top bit set on the last chunk. The file key is HKDF-SHA256 of the master key
with the file's random salt, so every file has a key of its own and chunk
nonces can be counters that never repeat under one key: chunk i's nonce is
i (11 bytes) followed by 1 for the last chunk and 0 for the others, and every
chunk authenticates the header as associated data. So a flipped byte,
chunks swapped, dropped or repeated, a file cut short (even at a chunk
boundary: the last chunk read was not marked last) and bytes appended after
the last chunk are all refused with BackupDamaged, before any plaintext of
the bad chunk is handed out.

The header check (SHA-256 of the header before it, cut to 8 bytes) is read
before the key lookup, so damaged key-id bytes are reported as a damaged
file, not as a key this installation does not hold; it needs no key, and the
chunks' authentication covers it too. Version 1 files (the same header
without the check) are still read.

Fernet would need the whole dump in memory to seal or open it; this needs
one chunk. The key id is a fingerprint of the master key, so a file says
which of the configured keys opens it without saying anything about the key.
"""

import hashlib
import os
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"OMNIBKUP"
VERSION = 2
UNCHECKED_VERSION = 1
KEY_ID_BYTES = 8
SALT_BYTES = 16
CHECK_BYTES = 8
UNCHECKED_HEADER = struct.Struct(f">{len(MAGIC)}sB{KEY_ID_BYTES}s{SALT_BYTES}sI")
HEADER = struct.Struct(f"{UNCHECKED_HEADER.format}{CHECK_BYTES}s")
HEADER_CHECK_CONTEXT = b"omniflow backup header\x00"
WORD = struct.Struct(">I")
LAST_CHUNK = 0x80000000
TAG_BYTES = 16
CHUNK_SIZE = 1 << 20
MAX_CHUNK_SIZE = 1 << 26
FILE_KEY_INFO = b"omniflow backup v1"
KEY_ID_CONTEXT = b"omniflow backup key id\x00"


class BackupError(Exception):
    """A backup could not be written, read or restored; the message says why (never a secret)."""

    code = "backup_failed"


class NotABackup(BackupError):
    code = "not_a_backup"


class UnknownBackupKey(BackupError):
    code = "backup_key_unknown"


class BackupDamaged(BackupError):
    code = "backup_damaged"


@dataclass(frozen=True)
class BackupKey:
    key_id: bytes
    material: bytes = b""

    @classmethod
    def from_secret(cls, secret):
        material = secret.encode()
        return cls(hashlib.sha256(KEY_ID_CONTEXT + material).digest()[:KEY_ID_BYTES], material)

    def __repr__(self):
        return f"BackupKey({self.key_id.hex()})"


def _file_cipher(key, salt):
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=FILE_KEY_INFO).derive(key.material)
    return AESGCM(derived)


def _header_check(fields):
    return hashlib.sha256(HEADER_CHECK_CONTEXT + fields).digest()[:CHECK_BYTES]


def _nonce(index, last):
    return index.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


class SealedWriter:
    """Write plaintext in; header and sealed chunks go to `out`. `close()` seals the last chunk."""

    def __init__(self, out, key, chunk_size=CHUNK_SIZE):
        if not 0 < chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunk size must be between 1 and {MAX_CHUNK_SIZE}")
        salt = os.urandom(SALT_BYTES)
        fields = UNCHECKED_HEADER.pack(MAGIC, VERSION, key.key_id, salt, chunk_size)
        self._header = fields + _header_check(fields)
        self._cipher = _file_cipher(key, salt)
        self._out = out
        self._chunk_size = chunk_size
        self._pending = bytearray()
        self._index = 0
        out.write(self._header)

    def write(self, data):
        self._pending += data
        # Hold back at least one byte past a full chunk: the last chunk must
        # be known to be last when it is sealed.
        while len(self._pending) > self._chunk_size:
            self._seal(bytes(self._pending[: self._chunk_size]), last=False)
            del self._pending[: self._chunk_size]

    def close(self):
        self._seal(bytes(self._pending), last=True)
        self._pending.clear()

    def _seal(self, plaintext, last):
        sealed = self._cipher.encrypt(_nonce(self._index, last), plaintext, self._header)
        self._out.write(WORD.pack(len(sealed) | (LAST_CHUNK if last else 0)))
        self._out.write(sealed)
        self._index += 1


def _read_exactly(source, size):
    data = source.read(size)
    while data and len(data) < size:
        more = source.read(size - len(data))
        if not more:
            break
        data += more
    return data


def unsealed_chunks(source, keys):
    """Yield the plaintext chunks of a backup read from `source`, each authenticated before it is yielded."""
    header = _read_exactly(source, UNCHECKED_HEADER.size)
    if len(header) < UNCHECKED_HEADER.size or not header.startswith(MAGIC):
        raise NotABackup("this is not an Omniflow backup file (no backup header)")
    _, version, key_id, salt, chunk_size = UNCHECKED_HEADER.unpack(header)
    if version not in (UNCHECKED_VERSION, VERSION):
        raise NotABackup(
            f"backup format version {version} is not one this version reads ({UNCHECKED_VERSION}, {VERSION})"
        )
    if version == VERSION:
        check = _read_exactly(source, CHECK_BYTES)
        if check != _header_check(header):
            raise BackupDamaged("the backup header is damaged (its check does not match)")
        header += check
    key = next((key for key in keys if key.key_id == key_id), None)
    if key is None:
        raise UnknownBackupKey(
            f"the backup was sealed with key id {key_id.hex()}, which APP_DATA_ENCRYPTION_KEY does not hold"
        )
    if not 0 < chunk_size <= MAX_CHUNK_SIZE:
        raise BackupDamaged("the backup header is damaged (impossible chunk size)")
    cipher = _file_cipher(key, salt)
    index = 0
    while True:
        word = _read_exactly(source, WORD.size)
        if len(word) < WORD.size:
            raise BackupDamaged(f"the backup is truncated: it ends at chunk {index}, before its last chunk")
        (value,) = WORD.unpack(word)
        last, length = bool(value & LAST_CHUNK), value & ~LAST_CHUNK
        if not TAG_BYTES <= length <= chunk_size + TAG_BYTES:
            raise BackupDamaged(f"chunk {index} of the backup is damaged (impossible length)")
        sealed = _read_exactly(source, length)
        if len(sealed) < length:
            raise BackupDamaged(f"the backup is truncated inside chunk {index}")
        try:
            plaintext = cipher.decrypt(_nonce(index, last), sealed, header)
        except InvalidTag:
            raise BackupDamaged(
                f"chunk {index} of the backup failed authentication: the file was altered or damaged"
            ) from None
        yield plaintext
        if last:
            if source.read(1):
                raise BackupDamaged("the backup has bytes after its last chunk: the file was altered")
            return
        index += 1
