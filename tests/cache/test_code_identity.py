"""Two builds of xlacs that differ in one lowering rule share one cache tier and one secret, as old and new
replicas do during a rolling deploy or after an upgrade: each build compiles and serves its own program."""
import os
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

import xlacs
import xlacs_server
from tests.cache.conftest import SECRET, Graph, ServeProcess
from xlacs.freeze import freeze

# The edit that makes the second build: its Tanh lowering computes sinh, under the same version number.
RULE = '"Tanh": (jnp.tanh,'
EDITED_RULE = '"Tanh": (jnp.sinh,'


def builds(directory: pathlib.Path) -> tuple[dict, dict]:
    """The environments of two builds, each a copy of the installed packages on PYTHONPATH (imported ahead of
    the installed tree): as installed, and with the Tanh rule edited."""
    paths = []
    for build in ("old", "new"):
        for package in (xlacs_server, xlacs):
            shutil.copytree(pathlib.Path(package.__file__).parent, directory / build / package.__name__,
                            ignore=shutil.ignore_patterns("__pycache__"))
        paths.append(os.pathsep.join([str(directory / build), *filter(None, [os.environ.get("PYTHONPATH")])]))
    unary = directory / "new" / "xlacs_server" / "lower" / "ops" / "unary.py"
    text = unary.read_text()
    assert RULE in text, f"{unary} no longer has {RULE!r}: pick another rule to edit"
    unary.write_text(text.replace(RULE, EDITED_RULE, 1))
    return tuple({"PYTHONPATH": path} for path in paths)


def tanh_graph() -> Graph:
    return Graph(freeze(tf.function(lambda x: tf.tanh(x) * 2.0), tf.TensorSpec((3, 5), tf.float32)), "tanh")


@pytest.fixture(params=["l2", "disk"])
def shared_tier(request, tmp_path) -> tuple[str, dict]:
    """(the tier's name, the environment of a replica using it): one Redis, or one directory without Redis."""
    if request.param == "l2":
        return "l2", {"XLACS_REDIS_URL": request.getfixturevalue("redis_server").url, "XLACS_CACHE_SECRET": SECRET}
    return "disk", {"XLACS_CACHE_DIR": str(tmp_path / "cache"), "XLACS_CACHE_SECRET": SECRET}


def test_a_build_with_another_lowering_rule_compiles_its_own_program(shared_tier, tmp_path):
    tier, env = shared_tier
    old_build, new_build = builds(tmp_path)
    graph = tanh_graph()
    x = graph.inputs()
    old = ServeProcess(tmp_path, {**env, **old_build})
    new = ServeProcess(tmp_path, {**env, **new_build})
    try:
        with old.client() as a, new.client() as b:
            compiled = graph.compile(a)
            assert compiled.cache == "miss"
            np.testing.assert_allclose(compiled.execute(x)[0], tf.tanh(*x.values()).numpy() * 2, rtol=1e-5)
            recompiled = graph.compile(b)
            assert (recompiled.cache, b.stats().compiles) == ("miss", 1)
            assert recompiled.id != compiled.id
            np.testing.assert_allclose(recompiled.execute(x)[0], tf.sinh(*x.values()).numpy() * 2, rtol=1e-5)
        old.stop()
        old.start()  # an old replica restarted in the middle of the deploy still finds its own entry
        with old.client() as a:
            loaded = graph.compile(a)
            assert (loaded.cache, loaded.id, a.stats().compiles) == (tier, compiled.id, 0)
            np.testing.assert_allclose(loaded.execute(x)[0], tf.tanh(*x.values()).numpy() * 2, rtol=1e-5)
    finally:
        new.stop()
        old.stop()
