"""The entry format: what round-trips, and every damaged or foreign entry refused with its reason."""
import struct

import pytest

from xlacs_server.cache.entry import MAGIC, Entry, RejectedEntry, decode, encode
from xlacs_server.compile.cache_key import CACHE_FORMAT_VERSION

SECRET = b"0123456789abcdef0123456789abcdef"
KEY = "model-0123abcd"


def entry() -> Entry:
    return Entry(KEY, {"graph_name": "model", "stage_ms": {"compile": 12.5}}, b"\x7fELF native code" * 50,
                 "module @jit_program {}", created=1700000000.0)


def reason(blob: bytes, key: str = KEY, secret: bytes = SECRET) -> str:
    with pytest.raises(RejectedEntry) as e:
        decode(blob, key, secret)
    return e.value.reason


def test_round_trip_keeps_metadata_code_and_text():
    assert decode(encode(entry(), SECRET), KEY, SECRET) == entry()


def test_layout_is_versioned_and_the_body_compressed():
    blob = encode(entry(), SECRET)
    magic, version, meta_len = struct.unpack_from(">8sII", blob)
    assert (magic, version) == (MAGIC, CACHE_FORMAT_VERSION)
    meta = blob[16:16 + meta_len].decode()
    assert '"compile": 12.5' in meta and '"executable": 800' in meta  # readable without the secret
    assert len(blob) < len(entry().executable)  # zstd shrank the repetitive code


@pytest.mark.parametrize("cut", [0, 10, 16, 40, -33, -1])
def test_truncated_entries_are_refused(cut):
    assert reason(encode(entry(), SECRET)[:cut]) in ("truncated", "mac")


def test_a_flipped_bit_anywhere_fails_the_mac():
    blob = bytearray(encode(entry(), SECRET))
    for position in (20, len(blob) // 2, len(blob) - 40, len(blob) - 1):
        damaged = bytearray(blob)
        damaged[position] ^= 0x01
        assert reason(bytes(damaged)) == "mac"


def test_another_secret_fails_the_mac():
    assert reason(encode(entry(), b"another secret of 32 bytes......")) == "mac"


def test_an_entry_copied_under_another_key_fails_the_mac():
    assert reason(encode(entry(), SECRET), key="other-0123abcd") == "mac"


def test_foreign_versions_and_foreign_bytes_are_refused_before_anything_is_parsed():
    blob = encode(entry(), SECRET)
    assert reason(blob[:8] + struct.pack(">I", CACHE_FORMAT_VERSION + 1) + blob[12:]) == "foreign"
    assert reason(b"\x80\x04\x95 a pickle, never loaded" * 4) == "foreign"
