"""Neural-network ops and their gradients against tf.raw_ops, through the service."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused, assert_refused_as_tf
from tests.oracle import RNG, compile_and_compare, ids, rand

rng = np.random.default_rng(0)
raw = tf.raw_ops
FLOATS = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_activations(client, dtype):
    def fn(x):
        return (raw.Elu(features=x), raw.Selu(features=x), raw.LeakyRelu(features=x),
                raw.LeakyRelu(features=x, alpha=1.5), raw.LogSoftmax(logits=x), raw.Softmax(logits=x))
    compile_and_compare(client, fn, [rand((3, 7), dtype)])


@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_activation_grads(client, dtype):
    def fn(g, x):
        return (raw.ReluGrad(gradients=g, features=x), raw.Relu6Grad(gradients=g, features=x * 3.0),
                raw.EluGrad(gradients=g, outputs=raw.Elu(features=x)),
                raw.SeluGrad(gradients=g, outputs=raw.Selu(features=x)),
                raw.LeakyReluGrad(gradients=g, features=x, alpha=0.3))
    compile_and_compare(client, fn, [rand((4, 5), dtype), rand((4, 5), dtype)])


@pytest.mark.parametrize("labels_shape", [(4, 6), (1, 6)], ids=str)
def test_softmax_cross_entropy(client, labels_shape):
    labels = rng.dirichlet(np.ones(6), size=labels_shape[0]).astype(np.float32)
    compile_and_compare(client, lambda f, l: raw.SoftmaxCrossEntropyWithLogits(features=f, labels=l),
                        [rand((4, 6), low=-10, high=10), labels])


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64], ids=ids)
def test_sparse_softmax_cross_entropy(client, label_dtype):
    compile_and_compare(client, lambda f, l: raw.SparseSoftmaxCrossEntropyWithLogits(features=f, labels=l),
                        [rand((5, 6), low=-10, high=10), rng.integers(0, 6, size=5).astype(label_dtype)])


@pytest.mark.parametrize("params", [dict(), dict(depth_radius=2, bias=2.0, alpha=0.5, beta=0.75)], ids=str)
def test_lrn_and_grad(client, params):
    def fn(x, g):
        y = raw.LRN(input=x, **params)
        return y, raw.LRNGrad(input_grads=g, input_image=x, output_image=y, **params)
    compile_and_compare(client, fn, [rand((2, 3, 3, 8)), rand((2, 3, 3, 8))])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=ids)
def test_bias_add_v1_and_grad(client, dtype, data_format):
    def fn(x, b):
        grad = raw.BiasAddGrad(out_backprop=x, data_format=data_format)
        return (raw.BiasAddV1(value=x, bias=b), grad) if data_format == "NHWC" else grad
    compile_and_compare(client, fn, [rand((2, 3, 4, 5), dtype), rand((5,), dtype)])


def batch_norm_inputs(x_shape, channels, dtype=np.float32):
    return [rand(x_shape, dtype), rand((channels,), low=0.5, high=1.5), rand((channels,)), rand((channels,)),
            rand((channels,), low=0.5, high=2)]


def batch_norm(version, is_training, **attrs):
    """FusedBatchNorm{version}'s outputs that TF defines: y and the running statistics, and when training the
    batch statistics. Not training, TF's own kernels leave those unset (oneDNN's, for 4-D float32, copy the
    given ones in); V3's reserve_space_3 is opaque, its shape up to the kernel."""
    def fn(x, scale, offset, mean, variance):
        outputs = getattr(raw, f"FusedBatchNorm{version}")(x=x, scale=scale, offset=offset, mean=mean,
                                                           variance=variance, is_training=is_training, **attrs)
        return outputs[:5 if is_training else 3]
    return fn


@pytest.mark.parametrize("data_format,x_shape", [("NHWC", (2, 3, 5, 4)), ("NCHW", (2, 4, 3, 5))], ids=str)
@pytest.mark.parametrize("is_training,factor", [(False, 1.0), (True, 1.0), (True, 0.3)], ids=str)
@pytest.mark.parametrize("version", ["", "V2", "V3"])
def test_fused_batch_norm_versions(client, version, is_training, factor, data_format, x_shape):
    fn = batch_norm(version, is_training, epsilon=1e-3, exponential_avg_factor=factor, data_format=data_format)
    compile_and_compare(client, fn, batch_norm_inputs(x_shape, 4))


@pytest.mark.parametrize("data_format,x_shape", [("NDHWC", (2, 3, 4, 2, 3)), ("NCDHW", (2, 3, 3, 4, 2))], ids=str)
@pytest.mark.parametrize("is_training", [False, True])
def test_fused_batch_norm_3d(client, is_training, data_format, x_shape):
    fn = batch_norm("V3", is_training, exponential_avg_factor=0.5, data_format=data_format)
    compile_and_compare(client, fn, batch_norm_inputs(x_shape, 3))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"], ids=ids)
@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("version", ["V2", "V3"])
def test_fused_batch_norm_half(client, version, is_training, dtype):
    """x and y in a half type, the statistics in float32."""
    fn = batch_norm(version, is_training, exponential_avg_factor=0.7, data_format="NCHW")
    compile_and_compare(client, fn, batch_norm_inputs((2, 4, 3, 5), 4, np.dtype(dtype)), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("version", ["", "V2", "V3"])
@pytest.mark.parametrize("is_training", [False, True])
def test_fused_batch_norm_grad(client, version, is_training):
    def fn(dy, x, scale, mean, variance):
        extra = dict(reserve_space_3=mean) if version == "V3" else {}
        return getattr(raw, f"FusedBatchNormGrad{version}")(
            y_backprop=dy, x=x, scale=scale, reserve_space_1=mean, reserve_space_2=variance, epsilon=1e-3,
            is_training=is_training, **extra)
    c = 3
    x = rand((2, 4, 4, c))
    compile_and_compare(client, fn, [rand((2, 4, 4, c)), x, rand((c,), low=0.5, high=1.5),
                                     x.mean((0, 1, 2)), x.var((0, 1, 2)) + rand((c,), low=0, high=0.5)])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides,dilation", [(1, 1), (2, 1), (1, 2)], ids=str)
def test_conv3d(client, strides, dilation, padding):
    compile_and_compare(client, lambda x, w: raw.Conv3D(input=x, filter=w, strides=[1, strides, strides, 1, 1],
                                                        padding=padding, dilations=[1, dilation, 1, dilation, 1]),
                        [rand((2, 6, 7, 5, 3)), rand((3, 2, 3, 3, 4))])


def conv_out_shape(x_shape, w_shape, strides, padding, dilations=(1, 1, 1, 1)):
    return tuple(raw.Conv2D(input=tf.zeros(x_shape), filter=tf.zeros(w_shape), strides=strides, padding=padding,
                            dilations=dilations).shape)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides,dilation", [(1, 1), (2, 1), (3, 1), (1, 2)], ids=str)
def test_conv2d_backprops(client, strides, dilation, padding):
    x_shape, w_shape = (2, 9, 8, 3), (3, 2, 3, 5)
    conv = dict(strides=[1, strides, strides, 1], padding=padding, dilations=[1, dilation, dilation, 1])
    dy = rand(conv_out_shape(x_shape, w_shape, **conv))

    def fn(x, w, dy):
        return (raw.Conv2DBackpropInput(input_sizes=tf.constant(x_shape), filter=w, out_backprop=dy, **conv),
                raw.Conv2DBackpropFilter(input=x, filter_sizes=tf.constant(w_shape), out_backprop=dy, **conv))
    compile_and_compare(client, fn, [rand(x_shape), rand(w_shape), dy])


def test_conv2d_backprop_explicit_padding(client):
    x_shape, w_shape = (1, 6, 6, 2), (3, 3, 2, 4)
    conv = dict(strides=[1, 2, 2, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 2, 1, 0, 0])
    dy = rand(tuple(raw.Conv2D(input=tf.zeros(x_shape), filter=tf.zeros(w_shape), **conv).shape))

    def fn(x, w, dy):
        return (raw.Conv2DBackpropInput(input_sizes=tf.constant(x_shape), filter=w, out_backprop=dy, **conv),
                raw.Conv2DBackpropFilter(input=x, filter_sizes=tf.constant(w_shape), out_backprop=dy, **conv))
    compile_and_compare(client, fn, [rand(x_shape), rand(w_shape), dy])


def test_conv2d_transpose_layer(client):
    """Keras' Conv2DTranspose is Conv2DBackpropInput with input_sizes computed from shapes."""
    layer = tf.keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same")
    layer.build((None, 5, 5, 3))
    compile_and_compare(client, lambda x: layer(x), [rand((2, 5, 5, 3))])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides", [1, 2])
def test_conv3d_backprops(client, strides, padding):
    x_shape, w_shape = (1, 5, 6, 4, 2), (2, 3, 2, 2, 3)
    conv = dict(strides=[1, strides, strides, strides, 1], padding=padding)
    dy = rand(tuple(raw.Conv3D(input=tf.zeros(x_shape), filter=tf.zeros(w_shape), **conv).shape))

    def fn(x, w, dy):
        return (raw.Conv3DBackpropInputV2(input_sizes=tf.constant(x_shape), filter=w, out_backprop=dy, **conv),
                raw.Conv3DBackpropFilterV2(input=x, filter_sizes=tf.constant(w_shape), out_backprop=dy, **conv))
    compile_and_compare(client, fn, [rand(x_shape), rand(w_shape), dy])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides,multiplier", [(1, 1), (2, 2)], ids=str)
def test_depthwise_backprops(client, strides, multiplier, padding):
    x_shape, w_shape = (2, 7, 7, 3), (3, 3, 3, multiplier)
    conv = dict(strides=[1, strides, strides, 1], padding=padding)
    dy = rand(tuple(raw.DepthwiseConv2dNative(input=tf.zeros(x_shape), filter=tf.zeros(w_shape), **conv).shape))

    def fn(x, w, dy):
        return (raw.DepthwiseConv2dNativeBackpropInput(input_sizes=tf.constant(x_shape), filter=w, out_backprop=dy,
                                                       **conv),
                raw.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=tf.constant(w_shape), out_backprop=dy,
                                                        **conv))
    compile_and_compare(client, fn, [rand(x_shape), rand(w_shape), dy])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("ksize,strides", [(2, 2), (3, 1)], ids=str)
def test_pool3d(client, ksize, strides, padding):
    pool = dict(ksize=[1, ksize, ksize, 2, 1], strides=[1, strides, strides, 1, 1], padding=padding)
    compile_and_compare(client, lambda x: (raw.MaxPool3D(input=x, **pool), raw.AvgPool3D(input=x, **pool)),
                        [rand((2, 5, 6, 4, 3))])


def pool_out_shape(x_shape, ksize, strides, padding):
    return tuple(raw.MaxPool(input=tf.zeros(x_shape), ksize=ksize, strides=strides, padding=padding).shape)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("ksize,strides", [(2, 2), (3, 2), (3, 1)], ids=str)
def test_pool_grads(client, ksize, strides, padding):
    x_shape = (2, 7, 6, 3)
    pool = dict(ksize=[1, ksize, ksize, 1], strides=[1, strides, strides, 1], padding=padding)
    out_shape = pool_out_shape(x_shape, **pool)

    def fn(x, grad, grad_grad):
        y = raw.MaxPool(input=x, **pool)
        ksize, strides = tf.constant(pool["ksize"]), tf.constant(pool["strides"])
        return (raw.MaxPoolV2(input=x, ksize=ksize, strides=strides, padding=padding),
                raw.MaxPoolGrad(orig_input=x, orig_output=y, grad=grad, **pool),
                raw.MaxPoolGradV2(orig_input=x, orig_output=y, grad=grad, ksize=ksize, strides=strides,
                                  padding=padding),
                raw.MaxPoolGradGrad(orig_input=x, orig_output=y, grad=grad_grad, **pool),
                raw.MaxPoolGradGradV2(orig_input=x, orig_output=y, grad=grad_grad, ksize=ksize, strides=strides,
                                      padding=padding),
                raw.AvgPoolGrad(orig_input_shape=tf.constant(x_shape), grad=grad, **pool),
                *raw.MaxPoolWithArgmax(input=x, **pool), *raw.MaxPoolWithArgmax(input=x, include_batch_in_index=True,
                                                                                **pool))
    compile_and_compare(client, fn, [rand(x_shape), rand(out_shape), rand(x_shape)])


def test_max_pool_grad_ties_go_to_the_first_maximum(client):
    pool = dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="SAME")
    x = rand((1, 5, 5, 2), np.int32, 0, 2)  # many ties

    def fn(x, grad, grad_grad):
        y = raw.MaxPool(input=x, **pool)
        return (raw.MaxPoolGrad(orig_input=x, orig_output=y, grad=grad, **pool),
                raw.MaxPoolGradGrad(orig_input=x, orig_output=y, grad=grad_grad, **pool))
    compile_and_compare(client, fn, [x, rand((1, 5, 5, 2), np.int32, -5, 5), rand((1, 5, 5, 2), np.int32, -5, 5)])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pool3d_grads(client, padding):
    x_shape = (1, 5, 4, 6, 2)
    pool = dict(ksize=[1, 2, 2, 3, 1], strides=[1, 2, 1, 2, 1], padding=padding)
    out_shape = tuple(raw.MaxPool3D(input=tf.zeros(x_shape), **pool).shape)

    def fn(x, grad, grad_grad):
        y = raw.MaxPool3D(input=x, **pool)
        return (raw.MaxPool3DGrad(orig_input=x, orig_output=y, grad=grad, **pool),
                raw.MaxPool3DGradGrad(orig_input=x, orig_output=y, grad=grad_grad, **pool),
                raw.AvgPool3DGrad(orig_input_shape=tf.constant(x_shape), grad=grad, **pool))
    # Distinct values, then three levels, so that most windows' maxima are tied, then all equal: a tied maximum's
    # gradient goes to its first element, as in the 2-D ops. The oracle is TF's graph, as it runs a GraphDef: its
    # MaxPool3DGrad is oneDNN's kernel, which does so (TF's XLA too); eager runs Eigen's, which feeds every tied one.
    distinct = (RNG.permutation(int(np.prod(x_shape))).reshape(x_shape) / 40.0 - 3.0).astype(np.float32)
    tied = RNG.integers(0, 3, x_shape).astype(np.float32)
    for x in (distinct, tied, np.ones(x_shape, np.float32)):
        compile_and_compare(client, fn, [x, rand(out_shape), rand(x_shape)], oracle=tf.function(fn))


# A quantization step is about 1e-2 here: a tolerance of 1e-6 catches a value rounded to the wrong step
# while allowing XLA's fused multiply-adds and summation order their last bit.
QUANT_TOLERANCE = dict(rtol=1e-6, atol=1e-6)


def quant_inputs(shape):
    """Values that include the exact range ends and rounding ties, where TF's arithmetic order matters."""
    x = rand(shape, low=-8, high=8)
    x.reshape(-1)[:4] = [-6.0, 6.0, 0.0, 0.5 * 12 / 255]
    return x


@pytest.mark.parametrize("num_bits,narrow_range", [(8, False), (8, True), (4, False), (16, False)], ids=str)
@pytest.mark.parametrize("low,high", [(-6.0, 6.0), (-0.3, 5.1), (0.2, 3.0)], ids=str)
def test_fake_quant(client, low, high, num_bits, narrow_range):
    attrs = dict(num_bits=num_bits, narrow_range=narrow_range)

    def fn(x, g, lo, hi):
        return (raw.FakeQuantWithMinMaxArgs(inputs=x, min=low, max=high, **attrs),
                raw.FakeQuantWithMinMaxArgsGradient(gradients=g, inputs=x, min=low, max=high, **attrs),
                raw.FakeQuantWithMinMaxVars(inputs=x, min=lo, max=hi, **attrs),
                raw.FakeQuantWithMinMaxVarsGradient(gradients=g, inputs=x, min=lo, max=hi, **attrs)[0])

    def range_gradients(x, g, lo, hi):  # sums over the inputs below and above the range
        return raw.FakeQuantWithMinMaxVarsGradient(gradients=g, inputs=x, min=lo, max=hi, **attrs)[1:]
    # Half steps of the unnudged range land on or next to rounding ties of the nudged one.
    half_steps = (low + np.arange(64) * np.float32((high - low) / (2 * ((1 << num_bits) - 1)))).astype(np.float32)
    x = np.concatenate([quant_inputs((40,)), half_steps]).reshape(8, 13)
    args = [x, rand((8, 13)), np.float32(low), np.float32(high)]
    compile_and_compare(client, fn, args, **QUANT_TOLERANCE)
    # A sum of up to 104 gradients carries the summation order's rounding, about 1e-6 here; one input counted on
    # the wrong side of the range moves it by that input's gradient (up to 3).
    compile_and_compare(client, range_gradients, args, rtol=1e-5, atol=1e-5)


def test_fake_quant_per_channel(client):
    def fn(x, g, lo, hi):
        return (raw.FakeQuantWithMinMaxVarsPerChannel(inputs=x, min=lo, max=hi),
                *raw.FakeQuantWithMinMaxVarsPerChannelGradient(gradients=g, inputs=x, min=lo, max=hi))
    compile_and_compare(client, fn, [quant_inputs((2, 3, 4)), rand((2, 3, 4)),
                                     np.array([-6, -0.3, 0, -1], np.float32),  # a [0, 0] range gives zeros
                                     np.array([6, 5.1, 0, 0.5], np.float32)],
                        **QUANT_TOLERANCE)


@pytest.mark.parametrize("signed,range_given,narrow,round_mode", [
    (True, False, False, "HALF_TO_EVEN"), (True, True, True, "HALF_UP"), (False, True, False, "HALF_TO_EVEN"),
    (False, False, False, "HALF_UP")], ids=str)
@pytest.mark.parametrize("axis", [-1, 1])
def test_quantize_and_dequantize(client, signed, range_given, narrow, round_mode, axis):
    attrs = dict(signed_input=signed, range_given=range_given, narrow_range=narrow, axis=axis)

    def fn(x, lo, hi):
        v3 = raw.QuantizeAndDequantizeV3(input=x, input_min=lo, input_max=hi, num_bits=tf.constant(6), **attrs)
        if axis != -1 and range_given:  # TF's V2 and V4 shape functions and kernels disagree: they cannot run
            return v3
        return (v3, raw.QuantizeAndDequantizeV2(input=x, input_min=lo, input_max=hi, num_bits=5,
                                                round_mode=round_mode, **attrs),
                raw.QuantizeAndDequantizeV4(input=x, input_min=lo, input_max=hi, num_bits=8, round_mode=round_mode,
                                            **attrs))
    x = rand((3, 4), low=-2, high=3) if signed else rand((3, 4), low=0, high=3)
    per_axis = (4,) if axis == 1 else ()
    lo, hi = np.full(per_axis, -1.5 if signed else 0, np.float32), np.full(per_axis, 2.5, np.float32)
    compile_and_compare(client, fn, [x, lo, hi - np.arange(lo.size, dtype=np.float32).reshape(per_axis) / 3],
                        **QUANT_TOLERANCE)


def test_quantize_and_dequantize_v4_grad(client):
    compile_and_compare(client, lambda g, x, lo, hi: raw.QuantizeAndDequantizeV4Grad(
        gradients=g, input=x, input_min=lo, input_max=hi, axis=1),
        [rand((3, 4)), rand((3, 4)), np.full(4, -1.0, np.float32), np.array([1, 2, 0.5, 3], np.float32)])


HALF_CASES = {  # op -> (fn of the inputs, input shapes); compared at the half types' own precision
    "activations": (lambda x: (raw.Elu(features=x), raw.Selu(features=x), raw.LeakyRelu(features=x),
                               raw.LogSoftmax(logits=x), raw.EluGrad(gradients=x, outputs=raw.Elu(features=x))),
                    [(3, 7)]),
    "conv_backprop": (lambda x, w: raw.Conv2DBackpropInput(input_sizes=tf.constant([1, 6, 6, 2]), filter=w,
                                                           out_backprop=x, strides=[1, 2, 2, 1], padding="SAME"),
                      [(1, 3, 3, 4), (3, 3, 2, 4)]),
    "conv3d": (lambda x, w: raw.Conv3D(input=x, filter=w, strides=[1] * 5, padding="SAME"), [(1, 4, 4, 4, 2),
                                                                                             (2, 2, 2, 2, 3)]),
    "pooling": (lambda x: (raw.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME"),
                           raw.AvgPoolGrad(orig_input_shape=tf.constant([1, 3, 4, 2]), grad=x, ksize=[1, 2, 2, 1],
                                           strides=[1, 1, 1, 1], padding="SAME")), [(1, 3, 4, 2)]),
    "batch_norm": (lambda x, s: raw.FusedBatchNormV3(x=x, scale=s, offset=s, mean=s, variance=s + 1.0,
                                                     is_training=False)[0], [(2, 3, 3, 2), (2,)]),
}


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"], ids=str)
@pytest.mark.parametrize("case", sorted(HALF_CASES))
def test_half_precision(client, case, dtype):
    fn, shapes = HALF_CASES[case]
    dtype = np.dtype(dtype)
    args = [rand(s).astype(dtype) if case != "batch_norm" or i == 0 else rand(s, low=0.5, high=1.5)
            for i, s in enumerate(shapes)]
    compile_and_compare(client, fn, args, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("batch_dims,data_format", [(1, "CHANNELS_LAST"), (2, "CHANNELS_LAST")], ids=str)
def test_generic_conv(client, batch_dims, data_format):
    x = rand((2, 3, 7, 6, 4)[2 - batch_dims:])
    compile_and_compare(client, lambda x, w: raw.Conv(input=x, filter=w, strides=[1, 2, 1, 1], padding="SAME",
                                                      dilations=[1, 1, 2, 1], data_format=data_format,
                                                      batch_dims=batch_dims), [x, rand((3, 3, 4, 5))])


@pytest.mark.parametrize("include_batch_in_index", [False, True])
def test_max_pool_grad_with_argmax(client, include_batch_in_index):
    pool = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")

    def fn(x, grad):
        _, argmax = raw.MaxPoolWithArgmax(input=x, include_batch_in_index=include_batch_in_index, **pool)
        return raw.MaxPoolGradWithArgmax(input=x, grad=grad, argmax=argmax,
                                         include_batch_in_index=include_batch_in_index, **pool)
    compile_and_compare(client, fn, [rand((2, 7, 6, 3)), rand((2, 4, 3, 3))])


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

F32 = np.float32
X = np.ones((1, 4, 4, 3), F32)
CONV = dict(T=F32, padding="SAME")
POOL = dict(T=F32, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")

# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "bias_of_another_length": ("BiasAdd", {"value": Fed((2, 3)), "bias": np.ones(4, F32)}, dict(T=F32),
                               {"input": "bias"}, r"'bias' has 4 elements, but 'value' of shape \[2, 3\] has 3",
                               lambda: raw.BiasAdd(value=np.ones((2, 3), F32), bias=np.ones(4, F32))),
    "bias_add_grad_of_a_vector": ("BiasAddGrad", {"out_backprop": Fed((3,))}, dict(T=F32), {"input": "out_backprop"},
                                  "rank at least 2", lambda: raw.BiasAddGrad(out_backprop=np.ones(3, F32))),
    "sparse_labels_of_rank_2": ("SparseSoftmaxCrossEntropyWithLogits",
                                {"features": Fed((2, 3)), "labels": np.zeros((2, 1), np.int32)},
                                dict(T=F32, Tlabels=np.int32), {"input": "labels"}, "must have rank 1",
                                lambda: raw.SparseSoftmaxCrossEntropyWithLogits(
                                    features=np.ones((2, 3), F32), labels=np.zeros((2, 1), np.int32))),
    "cross_entropy_labels": ("SoftmaxCrossEntropyWithLogits", {"features": Fed((2, 3)), "labels": np.ones((2, 4), F32)},
                             dict(T=F32), {"input": "labels"}, "incompatible shapes for broadcasting",
                             lambda: raw.SoftmaxCrossEntropyWithLogits(features=np.ones((2, 3), F32),
                                                                       labels=np.ones((2, 4), F32))),
    "batch_norm_scale": ("FusedBatchNormV3", {"x": Fed((1, 4, 4, 3)), "scale": np.ones(2, F32),
                                              **{k: np.ones(3, F32) for k in ("offset", "mean", "variance")}},
                         dict(T=F32, U=F32, is_training=False), {"input": "scale"},
                         "'scale' has 2 elements, but 'x' .* has 3 channels",
                         lambda: raw.FusedBatchNormV3(x=X, scale=np.ones(2, F32), offset=np.ones(3, F32),
                                                      mean=np.ones(3, F32), variance=np.ones(3, F32),
                                                      is_training=False)),
    "lrn_of_a_matrix": ("LRN", {"input": Fed((4, 3))}, dict(T=F32), {"input": "input"}, "must have rank 4",
                        lambda: raw.LRN(input=np.ones((4, 3), F32))),
    "relu_grad_shapes": ("ReluGrad", {"gradients": Fed((4, 3)), "features": np.ones(3, F32)}, dict(T=F32),
                         {"input": "features"}, "must be the same",
                         lambda: raw.ReluGrad(gradients=np.ones((4, 3), F32), features=np.ones(3, F32))),
    "conv_strides_of_3": ("Conv2D", {"input": Fed((1, 4, 4, 3)), "filter": np.ones((1, 1, 3, 2), F32)},
                          dict(CONV, strides=[1, 1, 1]), {"attr": "strides"}, "must have 4 entries",
                          lambda: raw.Conv2D(input=X, filter=np.ones((1, 1, 3, 2), F32), strides=[1, 1, 1],
                                             padding="SAME")),
    "depthwise_filter_depth": ("DepthwiseConv2dNative",
                               {"input": Fed((1, 4, 4, 3)), "filter": np.ones((1, 1, 2, 2), F32)},
                               dict(CONV, strides=[1, 1, 1, 1]), {"input": "filter"}, "is for 2 channels",
                               lambda: raw.DepthwiseConv2dNative(input=X, filter=np.ones((1, 1, 2, 2), F32),
                                                                 strides=[1, 1, 1, 1], padding="SAME")),
    "max_pool_ksize_0": ("MaxPool", {"input": Fed((1, 4, 4, 3))}, dict(POOL, ksize=[1, 0, 2, 1]), {"attr": "ksize"},
                         "each at least 1", lambda: raw.MaxPool(input=X, ksize=[1, 0, 2, 1], strides=[1, 1, 1, 1],
                                                                padding="SAME")),
    "avg_pool_of_rank_3": ("AvgPool", {"value": Fed((4, 4, 3))}, POOL, {"input": "value"}, "must have rank 4",
                           lambda: raw.AvgPool(value=X[0], ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                               padding="VALID")),
    "max_pool_grad_shape": ("MaxPoolGrad", {"orig_input": Fed((1, 4, 4, 3)), "orig_output": np.ones((1, 2, 2, 3), F32),
                                            "grad": np.ones((1, 3, 3, 3), F32)}, POOL, {"input": "grad"},
                            r"'grad' has shape \[1, 3, 3, 3\], but the pooling .* outputs \[1, 2, 2, 3\]",
                            lambda: raw.MaxPoolGrad(orig_input=X, orig_output=np.ones((1, 2, 2, 3), F32),
                                                    grad=np.ones((1, 3, 3, 3), F32), ksize=[1, 2, 2, 1],
                                                    strides=[1, 2, 2, 1], padding="VALID")),
}

# The same, without asking TF: its oneDNN CPU kernels (this build's) abort the process on some of these.
REFUSED_UNASKED = {
    "conv_of_rank_3": ("Conv2D", {"input": Fed((4, 4, 3)), "filter": np.ones((1, 1, 3, 2), F32)},
                       dict(CONV, strides=[1, 1, 1, 1]), {"input": "input"}, "must have rank 4"),
    "conv_backprop_input_sizes": ("Conv2DBackpropInput", {"input_sizes": np.array([1, 4, 4], np.int32),
                                                          "filter": np.ones((3, 3, 3, 2), F32),
                                                          "out_backprop": Fed((1, 4, 4, 2))},
                                  dict(CONV, strides=[1, 1, 1, 1]), {"input": "input_sizes"}, "vector of 4 sizes"),
    "softmax_of_a_scalar": ("Softmax", {"logits": Fed(())}, dict(T=F32), {"input": "logits"}, "rank at least 1"),
    "conv_explicit_paddings_of_3_pairs": ("Conv2D", {"input": Fed((1, 4, 4, 3)), "filter": np.ones((1, 1, 3, 2), F32)},
                                          dict(CONV, strides=[1, 1, 1, 1], padding="EXPLICIT",
                                               explicit_paddings=[0, 0, 1, 1, 1, 1]),
                                          {"attr": "explicit_paddings"}, "must hold 8 values"),
    "conv_backprop_out_backprop": ("Conv2DBackpropInput", {"input_sizes": np.array([1, 4, 4, 3], np.int32),
                                                           "filter": np.ones((3, 3, 3, 2), F32),
                                                           "out_backprop": Fed((1, 3, 3, 2))},
                                   dict(CONV, strides=[1, 1, 1, 1]), {"input": "out_backprop"},
                                   r"has shape \[1, 3, 3, 2\], but the convolution .* outputs \[1, 4, 4, 2\]"),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


@pytest.mark.parametrize("case", REFUSED_UNASKED, ids=str)
def test_what_tf_refuses_unasked_is_invalid_argument_naming_the_input(client, case):
    op, inputs, attr_values, blame, match = REFUSED_UNASKED[case]
    assert_refused(client, op, inputs, blame=blame, match=match, **attr_values)


@pytest.mark.parametrize("op,attr_values,attr", [
    ("Conv2D", dict(CONV, strides=[2, 1, 1, 1]), "strides"),
    ("MaxPool", dict(POOL, ksize=[2, 1, 1, 1]), "ksize"),
])
def test_windows_over_the_batch_are_unimplemented_as_in_tf(client, op, attr_values, attr):
    inputs = {"input": Fed((2, 4, 4, 3))} | ({"filter": np.ones((1, 1, 3, 2), F32)} if op == "Conv2D" else {})
    with pytest.raises(tf.errors.UnimplementedError):
        getattr(raw, op)(**{k: np.ones((2, 4, 4, 3), F32) if isinstance(v, Fed) else v for k, v in inputs.items()},
                         **{k: v for k, v in attr_values.items() if k != "T"})
    assert_refused(client, op, inputs, blame={"attr": attr}, code=grpc.StatusCode.UNIMPLEMENTED,
                   match="batch", **attr_values)


def test_conv2d_backprop_input_takes_the_spatial_input_sizes(client):
    """TF's kernel also takes input_sizes of the 2 spatial sizes: the batch comes from out_backprop, the depth
    from the filter."""
    def fn(w, dy):
        return raw.Conv2DBackpropInput(input_sizes=tf.constant([5, 4]), filter=w, out_backprop=dy,
                                       strides=[1, 1, 1, 1], padding="SAME")
    compile_and_compare(client, fn, [rand((3, 3, 2, 4)), rand((2, 5, 4, 4))])


def test_fused_batch_norm_training_takes_an_empty_mean_and_variance(client):
    """tf.compat.v1.nn.fused_batch_norm(is_training=True) gives the kernel empty running statistics."""
    def fn(x, scale, offset):
        empty = tf.zeros([0])
        return raw.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=empty, variance=empty, epsilon=1e-3,
                                    is_training=True)[:3]
    compile_and_compare(client, fn, [rand((2, 3, 3, 4)), rand((4,), low=0.5, high=1.5), rand((4,))])
