"""SavedModels with an unknown batch through shape buckets (docs/dynamic_shapes.md): batches 1, 3 and 8 from the
client and from `xlacs run`, matching TensorFlow, with one XLA compile per bucket (GetStats.bucket_compiles) on a
daemon of the test's own, whose cache starts empty."""
import json

import numpy as np
import pytest

from tests.client.test_cli import xlacs
from tests.saved_model.models import random_inputs, saved, tf_outputs
from tests.saved_model.test_compile import _compare
from xlacs import Client
from xlacs.saved_model import SavedModel

BUCKETS = (1, 4, 8)
BATCHES = (1, 3, 8)


@pytest.mark.parametrize("name", ["two_io_save", "two_io_export", "mobilenet_v2_save", "mobilenet_v2_export"])
def test_batches_1_3_8_compile_once_per_bucket(fresh_server, tmp_path, name):
    directory = saved(name)
    signature = SavedModel(directory).signature()
    with Client(fresh_server.address, timeout=600) as client:
        executable = client.compile_saved_model(directory, bucket_sizes=BUCKETS)
        assert all(spec.shape[0] == -1 for spec in executable.inputs.values())
        for batch in BATCHES:
            inputs = random_inputs(signature, batch, seed=batch)
            _compare(executable.execute(inputs), tf_outputs(directory, "serving_default", inputs))
        assert client.stats().bucket_compiles == len(BUCKETS)

        for batch in BATCHES:  # the same buckets from the command line: no compile
            inputs = random_inputs(signature, batch, seed=10 + batch)
            args = []
            for input_name, array in inputs.items():
                np.save(tmp_path / f"{input_name}.npy", array)
                args += ["--input", f"{input_name}={tmp_path / input_name}.npy"]
            record = json.loads(xlacs("run", str(directory), *args, "--bucket-sizes", ",".join(map(str, BUCKETS)),
                                      "--out", str(tmp_path / f"out{batch}"), server=fresh_server).stdout)
            _compare({n: np.load(o["path"]) for n, o in record["outputs"].items()},
                     tf_outputs(directory, "serving_default", inputs))
        assert client.stats().bucket_compiles == len(BUCKETS)
