"""The directory tier under attack by someone who can write the cache directory (but not the secret): planted
secrets and entries are never run, links and FIFOs are quick misses, loose permissions are refused at start.
And deployments with different secrets that share one Redis keep their entries apart."""
import dataclasses
import os
import pathlib
import stat
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET, settings
from xlacs import freeze
from xlacs_server.cache.entry import decode, encode
from xlacs_server.cache.secret import CacheConfigError, generated_secret_path
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService

ATTACKER_SECRET = b"the attacker's own secret, 32 by"


def spec_of(fn) -> CompileSpec:
    graph = freeze(tf.function(fn), tf.TensorSpec([4], tf.float32))
    name, (_, shape) = next(iter(graph.feeds.items()))
    return CompileSpec(graph.graph_def, [(name, 1, shape)], graph.fetches)


def run(service: CompilationService, spec: CompileSpec) -> tuple[str, np.ndarray]:
    result = service.compile(spec)
    _, (y,) = service.execute(result.loaded.id, {spec.feeds[0][0]: np.arange(4, dtype=np.float32)})
    return result.cache, y


def entry_files(directory) -> dict[str, os.DirEntry]:
    return {e.name: e for e in os.scandir(directory) if e.name.endswith(".xce")}


def bytes_read() -> int:
    """What this process has read with read() and the like so far (/proc/self/io's rchar)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.fixture
def cache_dir(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    return directory


def test_a_secret_and_entry_planted_in_the_directory_never_run(cache_dir):
    target, planted = spec_of(lambda x: x + 1.0), spec_of(lambda x: x * 100.0)  # same signature
    victim = CompilationService(settings(cache_dir=str(cache_dir)))
    assert run(victim, target)[0] == "miss"
    (name,) = entry_files(cache_dir)
    key = victim.tiers.l1.values()[0].key
    # The attacker compiles their program in a directory of their own under a secret of their own, signs that
    # entry for the target's key, and puts the secret where a directory tier used to keep its own.
    attacker_dir = cache_dir.parent / "attacker"
    CompilationService(settings(cache_dir=str(attacker_dir), cache_secret=ATTACKER_SECRET.decode())).compile(planted)
    (their_file,) = entry_files(attacker_dir).values()
    their_key = their_file.name.removesuffix(".xce").split(".", 1)[1]
    entry = decode(pathlib.Path(their_file.path).read_bytes(), their_key, ATTACKER_SECRET)
    blob = encode(dataclasses.replace(entry, key=key), ATTACKER_SECRET)
    (cache_dir / name).write_bytes(blob)
    (cache_dir / "secret").write_bytes(ATTACKER_SECRET)

    replica = CompilationService(settings(cache_dir=str(cache_dir)))
    cache, y = run(replica, target)
    assert cache == "miss" and replica.counters.compiles == 1
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32) + 1.0)
    assert {t.tier: t.stats for t in replica.tiers}["disk"].rejected == 1


@pytest.mark.parametrize("kind", ["fifo", "symlink to a big sparse file"])
def test_a_fifo_or_a_link_in_place_of_an_entry_is_a_quick_miss(cache_dir, tmp_path, kind):
    spec = spec_of(lambda x: x - 3.0)
    service = CompilationService(settings(cache_dir=str(cache_dir)))
    run(service, spec)
    (name,) = entry_files(cache_dir)
    path = cache_dir / name
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        sparse = tmp_path / "sparse"
        with open(sparse, "wb") as f:
            f.truncate(3 << 30)
        path.symlink_to(sparse)
    read_before = bytes_read()
    start = time.monotonic()
    fresh = CompilationService(settings(cache_dir=str(cache_dir)))
    cache, y = run(fresh, spec)
    assert time.monotonic() - start < 30  # a FIFO never blocks it; nothing of the 3 GiB is read
    assert cache == "miss" and {t.tier: t.stats for t in fresh.tiers}["disk"].rejected == 1
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32) - 3.0)
    assert bytes_read() - read_before < 256 << 20  # nothing of the 3 GiB was read
    assert stat.S_ISREG(os.lstat(path).st_mode)  # the recompile replaced it with an entry


def test_a_directory_others_can_write_is_refused_at_start(cache_dir):
    cache_dir.chmod(0o777)
    with pytest.raises(CacheConfigError, match=r"writable by its group or by others.*chmod go-w"):
        CompilationService(settings(cache_dir=str(cache_dir)))


def test_a_secret_file_others_can_write_or_inside_the_directory_is_refused(cache_dir, tmp_path):
    loose = tmp_path / "loose-secret"
    loose.write_text(SECRET)
    loose.chmod(0o666)
    with pytest.raises(CacheConfigError, match="writable by its group or by others"):
        CompilationService(settings(cache_dir=str(cache_dir), cache_secret_file=str(loose)))
    inside = cache_dir / "secret"
    inside.write_text(SECRET)
    inside.chmod(0o600)
    with pytest.raises(CacheConfigError, match="inside the cache directory"):
        CompilationService(settings(cache_dir=str(cache_dir), cache_secret_file=str(inside)))


def test_the_generated_secret_lives_outside_the_directory(cache_dir):
    CompilationService(settings(cache_dir=str(cache_dir)))
    secret = generated_secret_path()
    assert not secret.resolve().is_relative_to(cache_dir.resolve()) and not (cache_dir / "secret").exists()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and stat.S_IMODE(secret.parent.stat().st_mode) == 0o700


def test_two_secrets_share_one_redis_without_overwriting_each_other(redis_server):
    specs = [spec_of(lambda x, k=k: x * float(k)) for k in range(3)]
    for secret in (SECRET, SECRET + "-of-the-other-deployment"):
        writer = CompilationService(settings(redis_url=redis_server.url, cache_secret=secret))
        for spec in specs:
            writer.compile(spec)
    for secret in (SECRET, SECRET + "-of-the-other-deployment"):
        reader = CompilationService(settings(redis_url=redis_server.url, cache_secret=secret))
        assert [run(reader, spec)[0] for spec in specs] == ["l2"] * 3
        assert {t.tier: t.stats for t in reader.tiers}["l2"].rejected == 0
