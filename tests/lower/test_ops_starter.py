"""The starter op set against TensorFlow, through the running service, over shapes and dtypes."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused, assert_refused_as_tf
from tests.oracle import assert_close, compile_and_compare, rand, specs_of, traced
from xlacs import freeze
from xlacs_server.graph import attrs

raw = tf.raw_ops


SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
FLOATS = [np.float32, np.float64]

UNARY = {  # op -> (call with one input, input range)
    "Neg": (lambda x: raw.Neg(x=x), -3, 3), "Exp": (lambda x: raw.Exp(x=x), -3, 3),
    "Log": (lambda x: raw.Log(x=x), 0.1, 5), "Sqrt": (lambda x: raw.Sqrt(x=x), 0.1, 5),
    "Rsqrt": (lambda x: raw.Rsqrt(x=x), 0.1, 5), "Square": (lambda x: raw.Square(x=x), -3, 3),
    "Tanh": (lambda x: raw.Tanh(x=x), -3, 3), "Sigmoid": (lambda x: raw.Sigmoid(x=x), -5, 5),
    "Relu": (lambda x: raw.Relu(features=x), -3, 3), "Relu6": (lambda x: raw.Relu6(features=x), -3, 9),
    "Identity": (lambda x: raw.Identity(input=x), -3, 3),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(client, op, dtype, shape):
    fn, low, high = UNARY[op]
    compile_and_compare(client, fn, [rand(shape, dtype, low, high)])


BINARY = {"Add": raw.Add, "AddV2": raw.AddV2, "Sub": raw.Sub, "Mul": raw.Mul, "RealDiv": raw.RealDiv,
          "Maximum": raw.Maximum, "Minimum": raw.Minimum}


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((), (5,))], ids=str)
@pytest.mark.parametrize("op,dtype", [(op, d) for op in sorted(BINARY) for d in (np.float32, np.float64, np.int32, np.int64)
                                      if op != "RealDiv" or not np.issubdtype(d, np.integer)],  # RealDiv: floats only
                         ids=str)
def test_binary(client, op, dtype, shapes):
    low = 1 if op == "RealDiv" else -5
    compile_and_compare(client, lambda x, y: BINARY[op](x=x, y=y),
                        [rand(shapes[0], dtype, low, 5), rand(shapes[1], dtype, low, 5)])


@pytest.mark.parametrize("dtype", FLOATS + [np.int32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axis", [[0], [1, 2], [-1]], ids=str)
@pytest.mark.parametrize("op", ["Mean", "Sum", "Max"])
def test_reductions(client, op, axis, keep_dims, dtype):
    fn = getattr(raw, op)
    compile_and_compare(client, lambda x: fn(input=x, axis=tf.constant(axis), keep_dims=keep_dims),
                        [rand((2, 3, 4), dtype)])


@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul(client, transpose_a, transpose_b, dtype):
    a = rand((4, 3) if transpose_a else (3, 4), dtype)
    b = rand((5, 4) if transpose_b else (4, 5), dtype)
    compile_and_compare(client, lambda a, b: raw.MatMul(a=a, b=b, transpose_a=transpose_a, transpose_b=transpose_b),
                        [a, b])


@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, True)])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 5))], ids=str)
def test_batch_matmul(client, adj_x, adj_y, shapes):
    x, y = rand(shapes[0]), rand(shapes[1])
    x = np.swapaxes(x, -1, -2).copy() if adj_x else x
    y = np.swapaxes(y, -1, -2).copy() if adj_y else y
    compile_and_compare(client, lambda x, y: raw.BatchMatMulV2(x=x, y=y, adj_x=adj_x, adj_y=adj_y), [x, y])


@pytest.mark.parametrize("data_format,shape", [("NHWC", (2, 3, 3, 4)), ("NHWC", (5, 4))])  # TF's CPU kernel: NHWC only
def test_bias_add(client, data_format, shape):
    compile_and_compare(client, lambda x, b: raw.BiasAdd(value=x, bias=b, data_format=data_format),
                        [rand(shape), rand((4,))])


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4)], ids=str)
def test_softmax(client, shape):
    compile_and_compare(client, lambda x: raw.Softmax(logits=x), [rand(shape, np.float32, -10, 10)])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides,dilation", [(1, 1), (2, 1), (1, 2)])  # TF rejects strides and dilations > 1 together
def test_conv2d(client, padding, strides, dilation):
    compile_and_compare(client, lambda x, w: raw.Conv2D(input=x, filter=w, strides=[1, strides, strides, 1],
                                                        padding=padding, dilations=[1, dilation, dilation, 1]),
                        [rand((2, 9, 9, 3)), rand((3, 3, 3, 8))])


def test_conv2d_explicit_padding(client):
    compile_and_compare(client, lambda x, w: raw.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1], padding="EXPLICIT",
                                                        explicit_paddings=[0, 0, 1, 2, 2, 1, 0, 0]),
                        [rand((1, 6, 6, 2)), rand((3, 3, 2, 4))])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides", [1, 2])
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("kernel", [3, 5])
def test_depthwise_conv2d(client, padding, strides, multiplier, kernel):
    compile_and_compare(client, lambda x, w: raw.DepthwiseConv2dNative(
        input=x, filter=w, strides=[1, strides, strides, 1], padding=padding),
        [rand((2, 11, 11, 6)), rand((kernel, kernel, 6, multiplier))])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("ksize,strides", [(2, 2), (3, 2), (3, 1)])
@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_pooling(client, op, ksize, strides, padding):
    fn = getattr(raw, op)
    compile_and_compare(client, lambda x: fn(value=x, ksize=[1, ksize, ksize, 1], strides=[1, strides, strides, 1],
                                             padding=padding) if op == "AvgPool" else
                        fn(input=x, ksize=[1, ksize, ksize, 1], strides=[1, strides, strides, 1], padding=padding),
                        [rand((2, 7, 7, 3))])


@pytest.mark.parametrize("is_training", [False, True])
def test_fused_batch_norm(client, is_training):
    def fn(x, scale, offset, mean, var):
        return raw.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3,
                                    is_training=is_training)[0]
    c = 4
    compile_and_compare(client, fn, [rand((2, 5, 5, c)), rand((c,), low=0.5, high=1.5), rand((c,)), rand((c,)),
                                     rand((c,), low=0.5, high=2)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_array_ops(client, dtype):
    """Reshape, Transpose, ConcatV2, Pack, Squeeze, ExpandDims, Shape, StridedSlice, Pad, Cast, IdentityN."""
    def fn(x, y):
        shape = tf.shape(x)
        flat = raw.Reshape(tensor=x, shape=raw.Pack(values=[shape[0], -1], axis=0))
        t = raw.Transpose(x=x, perm=tf.constant([2, 0, 1]))
        cat = raw.ConcatV2(values=[x, y], axis=tf.constant(-1))
        packed = raw.Pack(values=[x, y], axis=1)
        sq = raw.Squeeze(input=raw.ExpandDims(input=x, axis=tf.constant(1)), axis=[1])
        sl = x[1:, ::-1, tf.newaxis, 2]
        sl2 = x[..., 1:3]
        padded = raw.Pad(input=x, paddings=tf.constant([[0, 1], [2, 0], [1, 1]]))
        cast = raw.Cast(x=x, DstT=tf.float64)
        a, b = raw.IdentityN(input=[x, y])
        return flat, t, cat, packed, sq, sl, sl2, padded, cast, a, b, tf.shape(x, out_type=tf.int64)
    low, high = (0, 1) if dtype == np.bool_ else (-5, 5)
    x, y = rand((2, 3, 4), np.int64, low, high).astype(dtype), rand((2, 3, 4), np.int64, low, high).astype(dtype)
    compile_and_compare(client, fn, [x, y])


def test_shape_arithmetic_stays_constant(client):
    """Shape -> StridedSlice -> Pack -> Reshape folds to a constant: the Reshape needs it at compile time."""
    def fn(x):
        s = tf.shape(x)
        return tf.reshape(x, tf.stack([s[0] * s[1], s[2] // 2, -1]))
    executable = compile_and_compare(client, fn, [rand((2, 3, 4))])
    assert [list(s.shape) for s in executable.signature.outputs] == [[6, 2, 2]]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_depthwise_conv2d_dilated_and_nchw(client, data_format, padding):
    """The XLA:CPU rule (shifted multiply-adds) with dilations and both layouts. TF's CPU kernel runs NHWC
    only, so the oracle is the NHWC op on the transposed input."""
    nchw = data_format == "NCHW"
    nhwc_pads = [0, 0, 2, 1, 1, 2, 0, 0]

    def depthwise(x, w, layout, explicit):
        strides, dilations = ([1, 1, 1, 1], [1, 1, 2, 2]) if layout == "NCHW" else ([1, 1, 1, 1], [1, 2, 2, 1])
        return tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=strides, padding=padding,
                                                dilations=dilations, data_format=layout,
                                                explicit_paddings=explicit if padding == "EXPLICIT" else [])

    x, w = rand((1, 4, 9, 9) if nchw else (1, 9, 9, 4)), rand((3, 3, 4, 2))
    ours = (lambda x, w: depthwise(x, w, "NCHW", nhwc_pads[:2] + nhwc_pads[6:] + nhwc_pads[2:6])) if nchw else \
        (lambda x, w: depthwise(x, w, "NHWC", nhwc_pads))
    frozen = freeze(traced(ours), *specs_of([x, w]))
    got, = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, [x, w])))
    x_nhwc = np.transpose(x, (0, 2, 3, 1)) if nchw else x
    want = depthwise(tf.constant(x_nhwc), tf.constant(w), "NHWC", nhwc_pads).numpy()
    assert_close(got, np.transpose(want, (0, 3, 1, 2)) if nchw else want)


def test_strided_slice_with_run_time_index(client):
    """x[i] with i fed (or a loop counter): the begin is only known at run time; the shape stays static."""
    def fn(x, i):
        return x[i], x[i, :, 1], x[:, i]
    x = rand((4, 3, 5))
    for i in (np.int32(2), np.int32(-1)):
        compile_and_compare(client, fn, [x, i])


def test_strided_slice_with_run_time_range_names_begin(client):
    import grpc
    def fn(x, i):
        return x[i:i + 2]
    frozen = freeze(traced(fn), *specs_of([rand((4, 3)), np.int32(1)]))
    with pytest.raises(grpc.RpcError) as e:
        client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'begin'" in e.value.details()


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

X23 = np.arange(6, dtype=np.float32).reshape(2, 3)
F32, I32 = np.float32, np.int32
SCALAR = np.int32(0).reshape(())


def ints(*values):
    return np.array(values, I32)


# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "reshape_to_another_size": ("Reshape", {"tensor": Fed((2, 3)), "shape": ints(4, 2)}, dict(T=F32, Tshape=I32),
                                {"input": "shape"}, r"has 6 values, which shape \[4, 2\] cannot hold",
                                lambda: raw.Reshape(tensor=X23, shape=[4, 2])),
    "reshape_two_unknown_sizes": ("Reshape", {"tensor": Fed((2, 3)), "shape": ints(-1, -1)}, dict(T=F32, Tshape=I32),
                                  {"input": "shape"}, "but for one -1",
                                  lambda: raw.Reshape(tensor=X23, shape=[-1, -1])),
    "transpose_repeated_axis": ("Transpose", {"x": Fed((2, 3)), "perm": ints(0, 0)}, dict(T=F32, Tperm=I32),
                                {"input": "perm"}, "not a permutation of the 2 dimensions",
                                lambda: raw.Transpose(x=X23, perm=[0, 0])),
    "transpose_of_another_rank": ("Transpose", {"x": Fed((2, 3)), "perm": ints(1, 0, 2)}, dict(T=F32, Tperm=I32),
                                  {"input": "perm"}, "not a permutation", lambda: raw.Transpose(x=X23, perm=[1, 0, 2])),
    "squeeze_a_dimension_of_3": ("Squeeze", {"input": Fed((2, 3))}, dict(T=F32, squeeze_dims=[1]),
                                 {"attr": "squeeze_dims"}, "dimension 1 .* is not one of size 1",
                                 lambda: raw.Squeeze(input=X23, axis=[1])),
    "expand_dims_at_two_places": ("ExpandDims", {"input": Fed((2, 3)), "dim": ints(0, 1)}, dict(T=F32, Tdim=I32),
                                  {"input": "dim"}, "must be one value",
                                  lambda: raw.ExpandDims(input=X23, axis=[0, 1])),
    "expand_dims_out_of_range": ("ExpandDims", {"input": Fed((2, 3)), "dim": SCALAR + 4}, dict(T=F32, Tdim=I32),
                                 {"input": "dim"}, r"in \[-3, 2\]", lambda: raw.ExpandDims(input=X23, axis=4)),
    "fill_with_a_vector": ("Fill", {"dims": ints(2, 2), "value": Fed((2,))}, dict(T=F32, index_type=I32),
                           {"input": "value"}, "must be a scalar",
                           lambda: raw.Fill(dims=[2, 2], value=np.ones(2, F32))),
    "fill_negative_size": ("Fill", {"dims": ints(2, -2), "value": Fed(())}, dict(T=F32, index_type=I32),
                           {"input": "dims"}, "sizes must be at least 0",
                           lambda: raw.Fill(dims=[2, -2], value=np.float32(1))),
    "empty_negative_size": ("Empty", {"shape": ints(2, -1)}, dict(dtype=F32), {"input": "shape"},
                            "sizes must be at least 0", lambda: raw.Empty(shape=[2, -1], dtype=tf.float32)),
    "range_delta_0": ("Range", {"start": SCALAR, "limit": SCALAR + 5, "delta": SCALAR}, dict(Tidx=I32),
                      {"input": "delta"}, "must not be 0", lambda: raw.Range(start=0, limit=5, delta=0)),
    "range_backwards": ("Range", {"start": SCALAR + 5, "limit": SCALAR, "delta": SCALAR + 1}, dict(Tidx=I32),
                        {"input": "start"}, r"must be <= 'limit'", lambda: raw.Range(start=5, limit=0, delta=1)),
    "lin_space_of_none": ("LinSpace", {"start": Fed(()), "stop": np.float32(1), "num": SCALAR}, dict(T=F32, Tidx=I32),
                          {"input": "num"}, "must be positive",
                          lambda: raw.LinSpace(start=np.float32(0), stop=np.float32(1), num=0)),
    "bitcast_wider_without_bytes": ("Bitcast", {"input": Fed((3,), np.uint8)}, dict(T=np.uint8, type=np.int16),
                                    {"input": "input"}, "needs a last dimension of 2",
                                    lambda: raw.Bitcast(input=np.ones(3, np.uint8), type=tf.int16)),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


def test_a_cast_to_strings_is_unimplemented(client):
    """TF has no kernel for it either (UNIMPLEMENTED)."""
    with pytest.raises(tf.errors.UnimplementedError):
        raw.Cast(x=X23, DstT=tf.string)
    assert_refused(client, "Cast", {"x": Fed((2, 3))}, blame={"attr": "DstT"}, code=grpc.StatusCode.UNIMPLEMENTED,
                   match="a cast from SrcT=float32 to DstT=DT_STRING is not supported", SrcT=F32,
                   DstT=attrs.OpaqueDType("DT_STRING"))
