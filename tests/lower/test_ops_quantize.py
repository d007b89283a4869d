"""What TF's FakeQuant and QuantizeAndDequantize kernels refuse is INVALID_ARGUMENT naming the node and the input
or attr at fault (their numerics are checked against TF in test_ops_nn.py)."""
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused_as_tf

raw = tf.raw_ops
F32 = np.float32
X = np.zeros((2, 3), F32)

# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "fake_quant_of_one_bit": ("FakeQuantWithMinMaxArgs", {"inputs": Fed((2, 3))}, dict(num_bits=1),
                              {"attr": "num_bits"}, r"must be in \[2, 16\]",
                              lambda: raw.FakeQuantWithMinMaxArgs(inputs=X, num_bits=1)),
    "fake_quant_empty_range": ("FakeQuantWithMinMaxArgs", {"inputs": Fed((2, 3))}, dict(min=1.0, max=-1.0),
                               {"attr": "min"}, "must be smaller than max",
                               lambda: raw.FakeQuantWithMinMaxArgs(inputs=X, min=1.0, max=-1.0)),
    "fake_quant_vars_vector_min": ("FakeQuantWithMinMaxVars", {"inputs": Fed((2, 3)), "min": np.zeros(1, F32),
                                                               "max": np.ones(1, F32)}, {},
                                   {"input": "min"}, "must have rank 0",
                                   lambda: raw.FakeQuantWithMinMaxVars(inputs=X, min=[0.0], max=[1.0])),
    "per_channel_min_of_another_length": ("FakeQuantWithMinMaxVarsPerChannel", {"inputs": Fed((2, 3)),
                                                                                "min": np.zeros(2, F32),
                                                                                "max": np.ones(2, F32)}, {},
                                          {"input": "min"}, "one value per channel",
                                          lambda: raw.FakeQuantWithMinMaxVarsPerChannel(inputs=X, min=[0.0, 0.0],
                                                                                        max=[1.0, 1.0])),
    "fake_quant_gradients_of_another_shape": ("FakeQuantWithMinMaxArgsGradient", {"gradients": Fed((3,)),
                                                                                  "inputs": Fed((2, 3))}, {},
                                              {"input": "gradients"}, "must have the shape",
                                              lambda: raw.FakeQuantWithMinMaxArgsGradient(gradients=X[0], inputs=X)),
    "quantize_seventy_bits": ("QuantizeAndDequantizeV2", {"input": Fed((2, 3)), "input_min": F32(0),
                                                          "input_max": F32(1)}, dict(T=F32, num_bits=70),
                              {"attr": "num_bits"}, "num_bits=70",
                              lambda: raw.QuantizeAndDequantizeV2(input=X, input_min=0.0, input_max=1.0, num_bits=70)),
    "quantize_axis_out_of_range": ("QuantizeAndDequantizeV2", {"input": Fed((2, 3)), "input_min": F32(0),
                                                               "input_max": F32(1)}, dict(T=F32, axis=2),
                                   {"attr": "axis"}, r"axis=2 must be -1 or in \[0, 2\)",
                                   lambda: raw.QuantizeAndDequantizeV2(input=X, input_min=0.0, input_max=1.0,
                                                                       axis=2)),
    "quantize_v4_grad_of_another_shape": ("QuantizeAndDequantizeV4Grad", {"gradients": Fed((3,)),
                                                                          "input": Fed((2, 3)), "input_min": F32(0),
                                                                          "input_max": F32(1)}, dict(T=F32),
                                          {"input": "gradients"}, "must have the shape",
                                          lambda: raw.QuantizeAndDequantizeV4Grad(gradients=X[0], input=X,
                                                                                  input_min=0.0, input_max=1.0)),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])
