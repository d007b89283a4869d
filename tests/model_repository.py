"""Model repositories for the tests (docs/model_repository.md), and ModelServer: a real daemon in this process on
one. The builders write a small Keras model (x: 4 floats -> tanh dense 8 -> dense 3), whose weights depend on the
version (so that a test tells versions apart), as a SavedModel or a frozen GraphDef; each returns a Built whose
`expected` runs the same model in TensorFlow, the oracle."""
from __future__ import annotations

import dataclasses
import pathlib
import textwrap
import time

import keras
import numpy as np
import tensorflow as tf

from xlacs.freeze import freeze
from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.rpc.server import create_server
from xlacs_server.daemon import Daemon

READY_TIMEOUT_S = 600  # the initial load of a repository: a few small models compile in seconds each
FEATURES, UNITS = 4, 3


class Context:
    """What ServedModel.infer asks of a request's context (a gRPC ServicerContext has both): a client waiting
    `deadline_s` (None: no deadline) that has not gone away."""

    def __init__(self, deadline_s: float | None = None):
        self.deadline = None if deadline_s is None else time.monotonic() + deadline_s

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def is_active(self) -> bool:
        return True


def keras_model(version: int) -> keras.Model:
    keras.utils.set_random_seed(version)
    x = keras.Input((FEATURES,), name="x")
    hidden = keras.layers.Dense(8, activation="tanh")(x)
    return keras.Model(x, keras.layers.Dense(UNITS, name="y")(hidden))


@dataclasses.dataclass
class Built:
    """A model written into a repository: its name, versions, input and output names as served, and TF's outputs."""
    name: str
    versions: tuple[int, ...]
    input: str
    output: str
    max_batch_size: int
    models: dict[int, keras.Model]

    def inputs(self, batch: int = 2, seed: int = 0) -> dict[str, np.ndarray]:
        return {self.input: np.random.default_rng(seed).uniform(-2, 2, (batch, FEATURES)).astype(np.float32)}

    def expected(self, inputs: dict[str, np.ndarray], version: int | None = None) -> dict[str, np.ndarray]:
        model = self.models[version or max(self.versions)]
        return {self.output: model(tf.constant(inputs[self.input])).numpy()}


def write_config(model_dir: pathlib.Path, text: str) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(text))


def saved_model(repo: pathlib.Path, name: str = "keras_sm", versions=(1,), config: str | None = None) -> Built:
    """A Keras SavedModel (model.export(): input "x", output "output_0", batch dim None) per version; no
    config.pbtxt unless `config` is given: the signature is the config, batching up to 4 (Triton's default)."""
    models = {}
    for version in versions:
        models[version] = keras_model(version)
        models[version].export(str(repo / name / str(version) / "model.savedmodel"), verbose=False)
    if config is not None:
        write_config(repo / name, config)
    return Built(name, tuple(versions), "x", "output_0", 4 if config is None else _max_batch_size(config), models)


def tf_serving_model(base: pathlib.Path, versions=(1,)) -> Built:
    """The Keras model of each version exported in TF Serving's layout, BASE/<version>/saved_model.pb (model.export():
    input "x", output "output_0", batch dim None; served batching up to 4, as a config-less SavedModel)."""
    models = {}
    for version in versions:
        models[version] = keras_model(version)
        models[version].export(str(base / str(version)), verbose=False)
    return Built(base.name, tuple(versions), "x", "output_0", 4, models)


def graphdef_model(repo: pathlib.Path, name: str = "keras_gd", versions=(1,), max_batch_size: int = 8,
                   extra_config: str = "") -> Built:
    """The Keras model frozen into model.graphdef per version, with a config.pbtxt naming input "x" and output
    "Identity"; max_batch_size 0 compiles a batch of 2 (dims [2, 4])."""
    models = {}
    batch = None if max_batch_size else 2
    for version in versions:
        models[version] = model = keras_model(version)
        frozen = freeze(tf.function(lambda x, model=model: model(x)), tf.TensorSpec((batch, FEATURES), tf.float32,
                                                                                     name="x"))
        assert list(frozen.feeds) == ["x:0"] and frozen.fetches == ["Identity:0"], (frozen.feeds, frozen.fetches)
        path = repo / name / str(version) / "model.graphdef"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(frozen.graph_def)
    dims = f"[{FEATURES}]" if max_batch_size else f"[2, {FEATURES}]"
    out_dims = f"[{UNITS}]" if max_batch_size else f"[2, {UNITS}]"
    write_config(repo / name, f"""
        platform: "tensorflow_graphdef"
        max_batch_size: {max_batch_size}
        input [{{ name: "x" data_type: TYPE_FP32 dims: {dims} }}]
        output [{{ name: "Identity" data_type: TYPE_FP32 dims: {out_dims} }}]
        """ + textwrap.dedent(extra_config))
    return Built(name, tuple(versions), "x", "Identity", max_batch_size, models)


def failing_model(repo: pathlib.Path, name: str = "broken") -> str:
    """A GraphDef model whose file is not a GraphDef: its load fails at the compile, with a valid config."""
    path = repo / name / "1" / "model.graphdef"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfenot a GraphDef")
    write_config(repo / name, """
        platform: "tensorflow_graphdef"
        input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
        output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]
        """)
    return name


def _max_batch_size(config: str) -> int:
    for line in config.splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip() == "max_batch_size":
            return int(value)
    return 0


class ModelServer:
    """A daemon in this process serving the repository `repo` (None: the models `settings` name, e.g. TF Serving's
    model_config_file): its gRPC server and dashboard (the protocol's REST routes) on free loopback ports. Entered,
    it has loaded every model (bounded: READY_TIMEOUT_S)."""

    def __init__(self, repo: pathlib.Path | None, **settings):
        self.settings = Settings(**{"cache_dir": "", **({"model_repository": str(repo)} if repo else {}), **settings})

    def __enter__(self) -> "ModelServer":
        self.service = Daemon(self.settings)
        self.server, port, _ = create_server(self.service, "127.0.0.1:0")
        self.http = HttpServer(create_app(self.service), "127.0.0.1", 0)
        self.server.start()
        self.http.start()
        self.grpc_address = f"127.0.0.1:{port}"
        self.http_address = f"127.0.0.1:{self.http.port}"
        self.service.models.start()
        if not self.service.models.wait_ready(READY_TIMEOUT_S):
            self.__exit__()
            raise TimeoutError(f"the model repository did not load within {READY_TIMEOUT_S} s")
        return self

    def __exit__(self, *exc) -> None:
        self.http.stop()
        self.server.stop(grace=None)
        self.service.close()

    @property
    def models(self):
        return self.service.models
