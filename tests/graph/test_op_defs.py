"""The OpList the daemon ships is this TensorFlow's; the attr definitions and defaults read from it are TF's."""
import importlib.util
import pathlib

import numpy as np

from xlacs_server.graph import op_defs

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_op_list_is_generated_from_this_tensorflow():
    spec = importlib.util.spec_from_file_location("gen_op_defs", ROOT / "scripts" / "gen_op_defs.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert (ROOT / "server" / "xlacs_server" / "graph" / "data" / "op_list.pb").read_bytes() == generator.op_list(), \
        "run scripts/gen_op_defs.py"


def test_attr_definitions_and_defaults_are_tfs():
    defs = op_defs.attr_defs("Conv2D")
    assert {name for name, d in defs.items() if d.required} == {"T", "strides", "padding"}
    assert defs["strides"].kind == "list(int)" and defs["T"].kind == "type"
    assert op_defs.attr_defs("ConcatV2")["N"].minimum == 2
    assert op_defs.default_attrs("Conv2D") == {"use_cudnn_on_gpu": True, "explicit_paddings": [],
                                               "data_format": "NHWC", "dilations": [1, 1, 1, 1]}
    assert op_defs.default_attrs("Unique") == {"out_idx": np.dtype(np.int32)}
    assert op_defs.default_attrs("LeakyRelu")["alpha"] == np.float32(0.2)  # a float attr is a float32


def test_defaults_are_fresh_for_each_node():
    op_defs.default_attrs("Conv2D")["dilations"].append(7)
    assert op_defs.default_attrs("Conv2D")["dilations"] == [1, 1, 1, 1]


def test_an_op_tensorflow_does_not_register_has_no_definitions():
    assert op_defs.op_def("MyCustomOp") is None and op_defs.attr_defs("MyCustomOp") is None
    assert op_defs.default_attrs("MyCustomOp") == {}
