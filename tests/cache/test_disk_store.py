"""The directory tier's bookkeeping: the counts GetStats shows between scans, and the bound when processes share
one directory (each store here stands for one process: it knows the others' entries only from its scans)."""
import os

import pytest

from xlacs_server.cache import disk
from xlacs_server.cache.disk import SUFFIX, DiskStore

ENTRY = 1000


def store(directory, max_bytes: int = 10 * ENTRY) -> DiskStore:
    return DiskStore(directory, max_bytes, ttl_s=0, max_entry_bytes=4 * ENTRY)


def on_disk(directory) -> dict[str, int]:
    return {p.name[:-len(SUFFIX)]: p.stat().st_size for p in directory.glob(f"*{SUFFIX}")}


def aged(directory, key: str, seconds_ago: float) -> None:
    """Sets the entry's LRU clock: eviction order must not hang on the file system's timestamp granularity."""
    os.utime(directory / f"{key}{SUFFIX}", (os.path.getatime(directory / f"{key}{SUFFIX}"),
                                              os.path.getmtime(directory / f"{key}{SUFFIX}") - seconds_ago))


def test_counts_follow_puts_replacements_and_deletes_without_a_scan(tmp_path):
    s = store(tmp_path)
    s.put("a", b"x" * ENTRY)
    s.put("b", b"x" * (2 * ENTRY))
    s.put("a", b"x" * (3 * ENTRY))  # a replacement counts its new size once
    assert (s.stats.entries, s.stats.bytes) == (2, 5 * ENTRY)
    s.delete("b")
    s.delete("never-written")
    assert (s.stats.entries, s.stats.bytes) == (1, 3 * ENTRY)
    assert on_disk(tmp_path) == {"a": 3 * ENTRY}
    assert store(tmp_path).stats.bytes == 3 * ENTRY  # a new store's scan agrees


def test_another_processes_entries_count_from_the_next_scan_and_the_bound_then_holds(tmp_path, monkeypatch):
    mine, theirs = store(tmp_path, max_bytes=4 * ENTRY), store(tmp_path, max_bytes=4 * ENTRY)
    for key in ("t1", "t2", "t3"):
        theirs.put(key, b"x" * ENTRY)
    for age, key in enumerate(("t3", "t2", "t1"), start=1):
        aged(tmp_path, key, 100 * age)  # t1 the least recently used
    mine.put("m1", b"x" * ENTRY)  # within what it knows of (its last scan was just now): no scan
    assert (mine.stats.entries, mine.stats.bytes) == (1, ENTRY)
    assert len(on_disk(tmp_path)) == 4
    monkeypatch.setattr(disk, "RESCAN_S", 0.0)  # the next put finds its last scan too old
    mine.put("m2", b"x" * ENTRY)
    assert on_disk(tmp_path) == {"t2": ENTRY, "t3": ENTRY, "m1": ENTRY, "m2": ENTRY}
    assert (mine.stats.entries, mine.stats.bytes, mine.stats.evictions) == (4, 4 * ENTRY, 1)


def test_a_put_over_the_bound_scans_at_once(tmp_path):
    s = store(tmp_path, max_bytes=2 * ENTRY)
    s.put("old", b"x" * ENTRY)
    aged(tmp_path, "old", 100)
    s.put("new", b"x" * ENTRY)
    s.put("newest", b"x" * ENTRY)
    assert set(on_disk(tmp_path)) == {"new", "newest"}
    assert (s.stats.entries, s.stats.bytes) == (2, 2 * ENTRY)


@pytest.mark.parametrize("entries", [1, 3])
def test_a_deleted_entry_another_store_counted_leaves_its_count_at_that_stores_next_scan(tmp_path, monkeypatch,
                                                                                         entries):
    first, second = store(tmp_path), store(tmp_path)
    for i in range(entries):
        first.put(f"k{i}", b"x" * ENTRY)
    monkeypatch.setattr(disk, "RESCAN_S", 0.0)
    second.put("s", b"x" * ENTRY)
    assert second.stats.entries == entries + 1
    first.delete("k0")
    second.put("s", b"x" * ENTRY)
    assert (second.stats.entries, second.stats.bytes) == (entries, entries * ENTRY)
