"""The repository as a deployment runs it: `xlacs serve --model-repository DIR` loads it in the background once the
servers are up, logging each model, version and batch bucket; a replica started on the same Redis loads every
executable from it and compiles nothing; a repository that is not a directory stops serve with what to fix."""
from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.cache.conftest import SECRET, ServeProcess
from tests.model_repository import Context, ModelServer, failing_model, graphdef_model, saved_model
from xlacs.cli import build_parser
from xlacs_server.config import Settings
from xlacs_server.errors import NotFound
from xlacs_server.main import settings_from_args
from xlacs_server.daemon import Daemon

LOG_WAIT_S = 300


def test_a_replica_on_the_same_redis_loads_every_executable_from_it_and_compiles_nothing(tmp_path, redis_server):
    # Batching up to 4: buckets 1, 2, 4 of each of its signatures (Keras's export writes "serving_default" and "serve",
    # and TF Serving's Predict serves both), and the static model's one executable.
    saved = saved_model(tmp_path, "keras_sm")
    static = graphdef_model(tmp_path, "keras_static", max_batch_size=0)
    settings = {"redis_url": redis_server.url, "cache_secret": SECRET}
    with ModelServer(tmp_path, **settings) as first:
        assert first.service.counters.compiles == 7
    with ModelServer(tmp_path, **settings) as second:
        service = second.service
        l2 = next(t for t in service.tiers if t.tier == "l2")
        assert service.counters.compiles == 0 and l2.stats.hits == 7
        for built in (saved, static):
            inputs = built.inputs(2)
            got = second.models.model(built.name).infer(inputs, None, Context())
            np.testing.assert_allclose(got[built.output], built.expected(inputs)[built.output], rtol=1e-5, atol=1e-5)
        assert service.counters.compiles == 0


def test_serve_loads_the_repository_in_the_background_logging_each_model_version_and_bucket(tmp_path):
    repo = tmp_path / "models"
    graphdef_model(repo, "keras_gd", max_batch_size=2)
    failing_model(repo, "broken")
    daemon = ServeProcess(tmp_path, {"XLACS_MODEL_REPOSITORY": str(repo), "XLACS_CACHE_DIR": ""})
    try:
        deadline = time.monotonic() + LOG_WAIT_S
        while "version(s) ready" not in (log := daemon.log.read_text()):
            assert time.monotonic() < deadline and daemon.process.poll() is None, log
            time.sleep(0.1)
    finally:
        daemon.stop()
    assert re.search(r"model repository \S+ loaded in [\d.]+ s: 1 version\(s\) ready, 1 unavailable", log)
    for line in ("model 'keras_gd' version 1: batch bucket 1 ready (miss)",
                 "model 'keras_gd' version 1: batch bucket 2 ready (miss)",
                 "model 'keras_gd' version 1 is ready (tensorflow_graphdef, max_batch_size 2)",
                 "model 'broken' version 1 failed to load: graph_def is not a serialized tensorflow.GraphDef"):
        assert line in log, log
    assert log.index("serving gRPC on") < log.index("loading model 'broken'")  # the servers answer first


def test_the_model_repository_flag_sets_the_setting(tmp_path):
    args = build_parser().parse_args(["serve", "--model-repository", str(tmp_path)])
    assert settings_from_args(args).model_repository == str(tmp_path)


def test_serve_refuses_a_model_repository_that_is_not_a_directory(tmp_path):
    done = subprocess.run([sys.executable, "-m", "xlacs.cli", "serve", "--server", "127.0.0.1:0",
                           "--model-repository", str(tmp_path / "absent")], capture_output=True, text=True,
                          timeout=LOG_WAIT_S, env={"XLACS_CACHE_DIR": "", "XLACS_HTTP_PORT": "0",
                                                   "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert f"xlacs serve: model_repository '{tmp_path / 'absent'}' is not a directory: give the directory holding " \
           "one directory per model" in done.stderr


def test_a_daemon_without_a_repository_serves_no_model_and_says_how_to_serve_one():
    service = Daemon(Settings(cache_dir=""))
    try:
        assert service.models.ready and service.models.index() == []
        with pytest.raises(NotFound, match="no model 'm' \\(the daemon has no model repository: start it with "
                                           "--model-repository DIR, or with TF Serving's models: "
                                           "--model-config-file PATH\\)"):
            service.models.load("m")
        with pytest.raises(NotFound, match="no model 'm'; the models served are none"):
            service.models.model("m")
    finally:
        service.close()
