"""The canonical fingerprint, seen through executable ids: invariant to names, order, devices, `_` attrs and
debug info; sensitive to ops, attrs, topology, kept constant values, signature and device kind."""
import random

import numpy as np
import pytest
import tensorflow as tf

from xlacs.v1 import tf_graph_pb2

FEEDS = {"x:0": ("float32", (1, 8, 8, 3))}


def base_graph(kernel_value=0.5, bias=(1.0, 2.0), activation=tf.nn.relu, strides=1, weights=None) -> bytes:
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (1, 8, 8, 3), name="x")
        k = tf.constant(np.full((3, 3, 3, 2), kernel_value, np.float32) if weights is None else weights)
        y = tf.nn.conv2d(x, k, strides=strides, padding="SAME")
        y = activation(tf.nn.bias_add(y, tf.constant(bias, tf.float32)))
        tf.identity(tf.reduce_mean(y, axis=[1, 2]), name="out")
    return g.as_graph_def().SerializeToString()


def disguise(data: bytes, seed=0) -> bytes:
    """Renames every node, shuffles their order, sets devices, adds `_` attrs and debug info."""
    gd = tf.compat.v1.GraphDef.FromString(data)
    rename = {n.name: f"renamed_{i}_{n.name[::-1]}" for i, n in enumerate(gd.node) if n.name != "x"}
    nodes = list(gd.node)
    random.Random(seed).shuffle(nodes)
    out = tf.compat.v1.GraphDef(versions=gd.versions)
    for n in nodes:
        n = out.node.add().CopyFrom(n) or out.node[-1]
        n.name = rename.get(n.name, n.name)
        n.device = "/job:worker/replica:0/task:3/device:CPU:0"
        n.attr["_class"].list.s.append(b"loc:@somewhere")
        for i, text in enumerate(n.input):
            ctl, name = ("^", text[1:]) if text.startswith("^") else ("", text)
            node, _, idx = name.partition(":")
            n.input[i] = ctl + rename.get(node, node) + (f":{idx}" if idx else "")
    out.debug_info.files.append("model.py")
    fetch = rename["out"] + ":0"
    return out.SerializeToString(), fetch


def exe_id(client, data, fetch="out:0", feeds=FEEDS, device=""):
    return client.compile(data, feeds, [fetch], device=device, name="fp").id


def test_invariant_to_names_order_devices_private_attrs_and_debug_info(client):
    data = base_graph()
    disguised, fetch = disguise(data)
    assert tf_graph_pb2.GraphDef.FromString(disguised).node[0].name != tf_graph_pb2.GraphDef.FromString(data).node[0].name
    assert exe_id(client, data) == exe_id(client, disguised, fetch)


@pytest.mark.parametrize("variant", [
    dict(activation=tf.nn.relu6),  # op
    dict(strides=2),  # attr
    dict(bias=(1.0, 2.5)),  # constant value kept inside the program
])
def test_sensitive_to_ops_attrs_and_kept_constants(client, variant):
    assert exe_id(client, base_graph()) != exe_id(client, base_graph(**variant))


def test_sensitive_to_topology(client):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (2,), name="x")
        y = tf.compat.v1.placeholder(tf.float32, (2,), name="y")
        tf.identity(x - y, name="a")
        tf.identity(y - x, name="b")
    data = g.as_graph_def().SerializeToString()
    feeds = {"x:0": ("float32", (2,)), "y:0": ("float32", (2,))}
    assert exe_id(client, data, "a:0", feeds) != exe_id(client, data, "b:0", feeds)


def test_sensitive_to_signature(client):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, None, name="x")
        tf.identity(x * 2.0, name="out")
    data = g.as_graph_def().SerializeToString()
    assert exe_id(client, data, feeds={"x:0": ("float32", (2,))}) != exe_id(client, data, feeds={"x:0": ("float32", (3,))})


def test_sensitive_to_device_kind(server):
    from xlacs_server import unit
    from xlacs_server.compile.cache_key import cache_key
    from xlacs_server.execute.devices import DeviceRef
    service = server.service
    cpu = service.devices.resolve("cpu:0")
    gpu_like = DeviceRef("gpu:0", "gpu", "NVIDIA A100", cpu.device)
    compile_unit = unit.build(base_graph(), [("x:0", 1, (1, 8, 8, 3))], ["out:0"], service.settings, cpu.platform)
    keys = {cache_key(service.compile_path.ingredients(compile_unit.graph, compile_unit.inputs, d)) for d in (cpu, gpu_like)}
    assert len(keys) == 2


def test_lifted_weights_enter_by_shape_not_value(client, server):
    """Weights above the lifting threshold do not change the program: same cache entry, new binding."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.normal(size=(3, 3, 3, 2048)).astype(np.float32) for _ in range(2))
    a = client.compile(base_graph(weights=w1, bias=np.zeros(2048)), FEEDS, ["out:0"], name="fp")
    b = client.compile(base_graph(weights=w2, bias=np.zeros(2048)), FEEDS, ["out:0"], name="fp")
    assert a.id.split(".")[0] == b.id.split(".")[0] and a.id != b.id and b.cache == "l1"
