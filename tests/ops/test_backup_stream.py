"""The encrypted backup format: what goes in comes out, and any change to the file is refused."""

import base64
import io

import pytest

from ops.backup_stream import (
    HEADER,
    WORD,
    BackupDamaged,
    BackupKey,
    NotABackup,
    SealedWriter,
    UnknownBackupKey,
    unsealed_chunks,
)

KEY = BackupKey.from_secret("stream-test-key-0123456789")
OTHER = BackupKey.from_secret("another-key-9876543210")
CHUNK = 64


def seal(plaintext, key=KEY, chunk_size=CHUNK, pieces=7):
    out = io.BytesIO()
    writer = SealedWriter(out, key, chunk_size)
    for start in range(0, len(plaintext), pieces):
        writer.write(plaintext[start : start + pieces])
    writer.close()
    return out.getvalue()


def unseal(sealed, keys=(KEY,)):
    return b"".join(unsealed_chunks(io.BytesIO(sealed), list(keys)))


def chunk_offsets(sealed):
    """Where each chunk's word starts, and the end of the file."""
    offsets, position = [], HEADER.size
    while position < len(sealed):
        offsets.append(position)
        (word,) = WORD.unpack(sealed[position : position + WORD.size])
        position += WORD.size + (word & 0x7FFFFFFF)
    return offsets, position


def plaintext_of(size):
    return bytes((index * 7 + 3) % 251 for index in range(size))


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 5])
def test_what_is_sealed_unseals_to_the_same_bytes(size):
    plaintext = plaintext_of(size)
    sealed = seal(plaintext)
    assert unseal(sealed) == plaintext
    offsets, end = chunk_offsets(sealed)
    assert end == len(sealed) and len(offsets) == max(1, -(-size // CHUNK))


def test_the_sealed_file_holds_no_plaintext():
    plaintext = b"customer Alice paid 500 minor units " * 20
    sealed = seal(plaintext)
    assert b"Alice" not in sealed and b"minor units" not in sealed


def test_two_files_of_the_same_plaintext_differ_entirely():
    plaintext = plaintext_of(200)
    first, second = seal(plaintext), seal(plaintext)
    assert first[HEADER.size :] != second[HEADER.size :] and first[:16] == second[:16]


def test_a_flipped_byte_anywhere_after_the_version_is_refused_as_damaged():
    sealed = seal(plaintext_of(3 * CHUNK + 5))
    for position in range(len(b"OMNIBKUP") + 1, len(sealed), 3):
        tampered = bytearray(sealed)
        tampered[position] ^= 0x01
        with pytest.raises(BackupDamaged):
            unseal(bytes(tampered))


def test_damaged_key_id_bytes_are_reported_as_damage_not_as_an_unknown_key():
    key_id_at = len(b"OMNIBKUP") + 1
    for position in range(key_id_at, key_id_at + len(KEY.key_id)):
        tampered = bytearray(seal(plaintext_of(10)))
        tampered[position] ^= 0x40
        with pytest.raises(BackupDamaged, match="header is damaged"):
            unseal(bytes(tampered), keys=(KEY, OTHER))


# A version 1 file (no header check) sealed with KEY, chunk size 64, plaintext_of(150).
VERSION_1_FILE = base64.b64decode(
    "T01OSUJLVVABZmeuXqsgm3yfCyTV+MH656pwFeY1ZOZXAAAAQAAAAFA/DTxVISfuFIRFB56w0ljNv7nIl1/FwpCG7SHyiMCCyseXqoY9hCZ+kH"
    "LoiwjGxismXDeB9VPOQ6OWDk8Bfc/CUL9Lzyd8RrxUMbqv7vV60QAAAFDMRj+J7LKAUVibHsKqTzXBdFeBgHfoQKkU1EoTFEc5FIPIrvJAHUtK"
    "ETZQK1XFSnU7LCF5M/wKdOhFvelKW/SdQYmjSx1icwqQVhh/MIRSJIAAACaNnQ1hM00Co1B5vmk/8+rq2he8mFd/wnplKFkQ6vOLIb2CO6ORjQ=="
)


def test_backups_written_in_version_1_still_open():
    assert unseal(VERSION_1_FILE) == plaintext_of(150)
    tampered = bytearray(VERSION_1_FILE)
    tampered[-20] ^= 0x01
    with pytest.raises(BackupDamaged):
        unseal(bytes(tampered))


def test_a_flipped_bit_in_a_chunk_names_that_chunk():
    sealed = bytearray(seal(plaintext_of(3 * CHUNK)))
    offsets, _ = chunk_offsets(bytes(sealed))
    sealed[offsets[1] + WORD.size + 10] ^= 0x80
    with pytest.raises(BackupDamaged, match="chunk 1 of the backup failed authentication"):
        unseal(bytes(sealed))


@pytest.mark.parametrize("cut", ["last_chunk", "inside_a_chunk", "inside_a_word", "header"])
def test_a_truncated_file_is_refused(cut):
    sealed = seal(plaintext_of(3 * CHUNK + 5))
    offsets, _ = chunk_offsets(sealed)
    length = {
        "last_chunk": offsets[-1],  # exactly at a chunk boundary: every chunk left is intact
        "inside_a_chunk": offsets[1] + 20,
        "inside_a_word": offsets[2] + 2,
        "header": HEADER.size - 3,
    }[cut]
    with pytest.raises((BackupDamaged, NotABackup)):
        unseal(sealed[:length])


def test_swapped_chunks_are_refused():
    sealed = seal(plaintext_of(3 * CHUNK + 5))
    offsets, end = chunk_offsets(sealed)
    first, second = sealed[offsets[0] : offsets[1]], sealed[offsets[1] : offsets[2]]
    swapped = sealed[: offsets[0]] + second + first + sealed[offsets[2] :]
    with pytest.raises(BackupDamaged, match="chunk 0"):
        unseal(swapped)


def test_a_dropped_middle_chunk_is_refused():
    sealed = seal(plaintext_of(3 * CHUNK + 5))
    offsets, _ = chunk_offsets(sealed)
    with pytest.raises(BackupDamaged):
        unseal(sealed[: offsets[1]] + sealed[offsets[2] :])


def test_bytes_appended_after_the_last_chunk_are_refused():
    with pytest.raises(BackupDamaged, match="after its last chunk"):
        unseal(seal(plaintext_of(100)) + b"\x00")


def test_a_file_sealed_with_a_key_not_configured_names_its_key_id_and_never_a_key():
    sealed = seal(plaintext_of(10), key=OTHER)
    with pytest.raises(UnknownBackupKey) as refused:
        unseal(sealed, keys=(KEY,))
    message = str(refused.value)
    assert OTHER.key_id.hex() in message
    assert "another-key" not in message and "stream-test-key" not in message


def test_an_older_key_still_listed_opens_its_files():
    plaintext = plaintext_of(150)
    assert unseal(seal(plaintext, key=OTHER), keys=(KEY, OTHER)) == plaintext


def test_a_file_that_is_not_a_backup_is_named_so():
    with pytest.raises(NotABackup):
        unseal(b"PGDMP" + bytes(100))
