"""Array ops (creation, shapes, slicing, joining, reversing, padding) against tf.raw_ops, through the service."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused, assert_refused_as_tf, ints
from tests.oracle import compile_and_compare, ids, rand, specs_of, traced
from xlacs import error_details, freeze

raw = tf.raw_ops
DTYPES = [np.float32, np.int32, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_shapes_and_fills(client, dtype):
    """Rank, Size, ShapeN, Fill, Empty, PlaceholderWithDefault, EnsureShape, CheckNumerics."""
    def fn(x, y):
        a, b = raw.ShapeN(input=[x, y], out_type=tf.int64)
        filled = raw.Fill(dims=raw.Shape(input=y), value=x[0, 0])
        empty = raw.Empty(shape=tf.constant([2, 3]), dtype=tf.as_dtype(dtype), init=True)
        default = raw.PlaceholderWithDefault(input=x, shape=[2, 5])
        ensured = raw.EnsureShape(input=x, shape=[2, None])
        return raw.Rank(input=x), raw.Size(input=y, out_type=tf.int64), a, b, filled, empty, default, ensured
    compile_and_compare(client, fn, [rand((2, 5), dtype), rand((3, 1, 4), dtype)])


def test_check_numerics_and_assert_pass_values_through(client):
    def fn(x, ok):
        with tf.control_dependencies([raw.Assert(condition=ok, data=[x])]):
            return raw.CheckNumerics(tensor=x, message="x is finite")
    compile_and_compare(client, fn, [rand((3, 4)), np.array(True)])


def test_ensure_shape_mismatch_is_an_error(client):
    frozen = freeze(traced(lambda x: raw.EnsureShape(input=x, shape=[3, 5])), tf.TensorSpec([None, 5]))
    with pytest.raises(grpc.RpcError, match=r"has shape \[2, 5\], but EnsureShape expects \[3, 5\]"):
        client.compile(frozen.graph_def, {name: (np.float32, (2, 5)) for name in frozen.feeds}, frozen.fetches)


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, tf.int32), (10, -3, -4, tf.int64), (0.5, 7.1, 0.3, tf.float32), (1.0, -2.0, -0.1, tf.float64),
    (0.0, 1.0, 0.1, tf.float32)], ids=str)
def test_range(client, start, limit, delta, dtype):
    def fn(x):
        r = raw.Range(start=tf.constant(start, dtype), limit=tf.constant(limit, dtype), delta=tf.constant(delta, dtype))
        return r, tf.reshape(x, tf.shape(r))  # the Range output is a constant shape source
    n = len(raw.Range(start=tf.constant(start, dtype), limit=tf.constant(limit, dtype),
                      delta=tf.constant(delta, dtype)))
    compile_and_compare(client, fn, [rand((n,))], rtol=0, atol=0)


@pytest.mark.parametrize("num", [1, 2, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=ids)
def test_lin_space(client, num, dtype):
    compile_and_compare(client, lambda a, b: raw.LinSpace(start=a, stop=b, num=tf.constant(num)),
                        [np.array(-1.3, dtype), np.array(4.1, dtype)], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_slicing(client, dtype):
    """Slice (constant and runtime begin), Split, SplitV, Unpack, StridedSlice with every mask."""
    def fn(x, begin):
        whole = raw.Slice(input=x, begin=tf.constant([1, 0, 2]), size=tf.constant([1, -1, 2]))
        moving = raw.Slice(input=x, begin=begin, size=tf.constant([1, 2, 3]))
        halves = raw.Split(axis=tf.constant(-1), value=x, num_split=2)
        parts = raw.SplitV(value=x, size_splits=tf.constant([1, -1, 1]), axis=tf.constant(1), num_split=3)
        rows = raw.Unpack(value=x, num=3, axis=1)
        masked = raw.StridedSlice(input=x, begin=tf.constant([0, 1, 0, 1]), end=tf.constant([0, 3, 0, -1]),
                                  strides=tf.constant([1, 1, 1, 2]), begin_mask=1, end_mask=1, ellipsis_mask=0,
                                  new_axis_mask=4, shrink_axis_mask=0)
        shrunk = raw.StridedSlice(input=x, begin=tf.constant([1, -1]), end=tf.constant([2, 0]),
                                  strides=tf.constant([1, -1]), ellipsis_mask=1, shrink_axis_mask=0, end_mask=2)
        return (whole, moving, *halves, *parts, *rows, masked, shrunk)
    compile_and_compare(client, fn, [rand((2, 3, 4), dtype), np.array([1, 1, 0], np.int32)])


@pytest.mark.parametrize("strides,masks", [([1, 2, -1], {}), ([1, 2, 2], dict(begin_mask=2, end_mask=1)),
                                           ([1, 2, 2], dict(shrink_axis_mask=1)),
                                           ([1, 2, 2], dict(ellipsis_mask=1, new_axis_mask=2))], ids=str)
def test_strided_slice_grad(client, strides, masks):
    begin, end, strides = tf.constant([1, 0, 1]), tf.constant([2, 3, 4]), tf.constant(strides)
    shape = tf.constant([3, 4, 5])
    dy_shape = tf.strided_slice(tf.zeros(shape), begin, end, strides, **masks).shape
    compile_and_compare(client, lambda dy: raw.StridedSliceGrad(shape=shape, begin=begin, end=end, strides=strides,
                                                                dy=dy, **masks), [rand(tuple(dy_shape))])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_joining(client, dtype):
    """Concat, ConcatV2, ConcatOffset, Pack, Tile."""
    def fn(x, y):
        shape_x, shape_y = tf.shape(x), tf.shape(y)
        offsets = raw.ConcatOffset(concat_dim=tf.constant(1), shape=[shape_x, shape_y, shape_x])
        return (raw.Concat(concat_dim=tf.constant(1), values=[x, y, x]),
                raw.ConcatV2(values=[y, x], axis=tf.constant(-2)),
                *offsets, raw.Pack(values=[x, x], axis=-1), raw.Tile(input=y, multiples=tf.constant([2, 1, 3])))
    compile_and_compare(client, fn, [rand((2, 3, 4), dtype), rand((2, 1, 4), dtype)])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_reversing(client, dtype):
    def fn(x, lengths, short_lengths):
        return (raw.Reverse(tensor=x, dims=tf.constant([True, False, True])),
                raw.ReverseV2(tensor=x, axis=tf.constant([-1, 1])),
                raw.ReverseV2(tensor=x, axis=tf.constant([], tf.int32)),
                raw.ReverseSequence(input=x, seq_lengths=lengths, seq_dim=2, batch_dim=0),
                raw.ReverseSequence(input=x, seq_lengths=short_lengths, seq_dim=0, batch_dim=1))
    compile_and_compare(client, fn, [rand((4, 3, 5), dtype), np.array([0, 5, 2, 1], np.int64),
                                     np.array([4, 1, 2], np.int32)])


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=ids)
@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_padding(client, mode, dtype):
    paddings = tf.constant([[1, 2], [0, 1], [2, 2]])

    def fn(x, value):
        return (raw.MirrorPad(input=x, paddings=paddings, mode=mode), raw.PadV2(input=x, paddings=paddings,
                                                                               constant_values=value),
                raw.Pad(input=x, paddings=paddings))
    compile_and_compare(client, fn, [rand((3, 4, 5), dtype), np.array(7, dtype)])


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_grad(client, mode):
    compile_and_compare(client, lambda g: raw.MirrorPadGrad(input=g, paddings=tf.constant([[1, 2], [2, 0]]), mode=mode),
                        [rand((7, 6))])


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=ids)
def test_space_batch_rearrangements(client, dtype):
    def fn(x, y):
        to_batch = raw.SpaceToBatchND(input=x, block_shape=tf.constant([2, 3]), paddings=tf.constant([[1, 1], [2, 1]]))
        back = raw.BatchToSpaceND(input=to_batch, block_shape=tf.constant([2, 3]), crops=tf.constant([[1, 1], [2, 1]]))
        one_d = raw.SpaceToBatchND(input=y, block_shape=tf.constant([2]), paddings=tf.constant([[0, 2]]))
        legacy = raw.SpaceToBatch(input=x, paddings=tf.constant([[0, 0], [1, 1]]), block_size=2)
        return (to_batch, back, one_d, legacy, raw.BatchToSpace(input=legacy, crops=tf.constant([[0, 0], [1, 1]]),
                                                                block_size=2),
                raw.BatchToSpaceND(input=y, block_shape=tf.constant([2]), crops=tf.constant([[1, 0]])))
    compile_and_compare(client, fn, [rand((2, 4, 6, 3), dtype), rand((4, 6, 2), dtype)])


@pytest.mark.parametrize("block", [2, 3])
def test_space_depth_rearrangements(client, block):
    def fn(x):
        down = raw.SpaceToDepth(input=x, block_size=block)
        return down, raw.DepthToSpace(input=down, block_size=block), raw.DepthToSpace(input=x, block_size=2)
    compile_and_compare(client, fn, [rand((2, 6, 12, 4))])


def test_space_depth_nchw(client):
    # TF's CPU kernels only run NHWC; the oracle is the NHWC op between transposes.
    def fn(x):
        nchw = tf.transpose(x, [0, 3, 1, 2])
        down = tf.transpose(raw.SpaceToDepth(input=nchw, block_size=2, data_format="NCHW"), [0, 2, 3, 1])
        up = tf.transpose(raw.DepthToSpace(input=nchw, block_size=2, data_format="NCHW"), [0, 2, 3, 1])
        return down, up
    x = rand((1, 4, 6, 8))
    frozen_fn = tf.function(fn)
    graph = frozen_fn.get_concrete_function(tf.TensorSpec(x.shape)).graph.as_graph_def()
    assert {n.op for n in graph.node} >= {"SpaceToDepth", "DepthToSpace"}
    want = [raw.SpaceToDepth(input=x, block_size=2), raw.DepthToSpace(input=x, block_size=2)]
    executable = client.compile_function(frozen_fn, tf.TensorSpec(x.shape))
    for got, expected in zip(executable.execute({"x:0": x}), want):
        np.testing.assert_array_equal(got, expected)


def nhwc_of_vect_c(x):
    """[N, C/4, H, W, 4] -> [N, H, W, C]: channel c is at [c // 4, c % 4]."""
    n, blocks, h, w, _ = x.shape
    return tf.reshape(tf.transpose(x, [0, 2, 3, 1, 4]), [n, h, w, 4 * blocks])


def vect_c_of_nhwc(x):
    n, h, w, c = x.shape
    return tf.transpose(tf.reshape(x, [n, h, w, c // 4, 4]), [0, 3, 1, 2, 4])


@pytest.mark.parametrize("dtype", [np.int8, np.float32], ids=ids)
def test_space_depth_nchw_vect_c(client, dtype):
    """NCHW_VECT_C, TF's layout of int8 for cuDNN, which tf2xla lowers for any type. TF's CPU kernels have no
    NCHW_VECT_C: the oracle is the NHWC op between the layout's transposes, and TF's XLA path agrees with it."""
    def fn(x, y):
        return (raw.SpaceToDepth(input=x, block_size=2, data_format="NCHW_VECT_C"),
                raw.DepthToSpace(input=y, block_size=2, data_format="NCHW_VECT_C"))

    def via_nhwc(x, y):
        return (vect_c_of_nhwc(raw.SpaceToDepth(input=nhwc_of_vect_c(x), block_size=2)),
                vect_c_of_nhwc(raw.DepthToSpace(input=nhwc_of_vect_c(y), block_size=2)))
    args = [rand((2, 1, 4, 6, 4), dtype, -100, 100), rand((2, 8, 3, 2, 4), dtype, -100, 100)]
    compile_and_compare(client, fn, args, oracle=via_nhwc)
    for xla, want in zip(tf.function(fn, jit_compile=True)(*args), via_nhwc(*args)):
        np.testing.assert_array_equal(xla, want)


@pytest.mark.parametrize("op,shape,blame,match", [
    ("SpaceToDepth", (1, 4, 2, 2, 3), {"input": "input"}, "packs channels by 4"),
    ("DepthToSpace", (1, 4, 2, 2, 3), {"input": "input"}, "packs channels by 4"),
    ("DepthToSpace", (1, 2, 2, 2, 4), {"attr": "block_size"}, "2 channels, which NCHW_VECT_C cannot pack by 4"),
], ids=["SpaceToDepth_vector_of_3", "DepthToSpace_vector_of_3", "DepthToSpace_to_2_channels"])
def test_nchw_vect_c_refusals(client, op, shape, blame, match):
    """What TF's XLA path refuses too: a last dimension other than 4 (tf2xla), an output whose channels do not
    pack by 4 (TF's shape function)."""
    assert_refused(client, op, {"input": Fed(shape, np.int8)}, blame=blame, match=match, T=np.int8, block_size=2,
                   data_format="NCHW_VECT_C")


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("ksizes,strides,rates", [(2, 1, 1), (3, 2, 1), (2, 3, 2)], ids=str)
def test_extract_image_patches(client, ksizes, strides, rates, padding):
    compile_and_compare(client, lambda x: raw.ExtractImagePatches(
        images=x, ksizes=[1, ksizes, ksizes + 1, 1], strides=[1, strides, strides, 1], rates=[1, rates, rates, 1],
        padding=padding), [rand((2, 7, 8, 3))])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_extract_volume_patches(client, padding):
    compile_and_compare(client, lambda x: raw.ExtractVolumePatches(
        input=x, ksizes=[1, 2, 3, 2, 1], strides=[1, 2, 1, 2, 1], padding=padding), [rand((1, 5, 6, 7, 2), np.int32)])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int32], ids=ids)
def test_conjugate_transpose(client, dtype):
    x = rand((2, 3, 4), np.float32).astype(dtype)
    if dtype == np.complex64:
        x = x + 1j * rand((2, 3, 4))
    compile_and_compare(client, lambda x: raw.ConjugateTranspose(x=x, perm=tf.constant([1, 2, 0])), [x])


def graph_with(build):
    """A GraphDef holding ops tf.raw_ops does not expose, built by `build(graph)` -> fetched tensors."""
    graph = tf.Graph()
    with graph.as_default():
        fetches = build(graph)
    return graph.as_graph_def(), [t.name for t in fetches]


def test_list_array_conversions(client):
    """_ListToArray and _ArrayToList (the tf2xla plumbing of function arguments) pass values through."""
    def build(graph):
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        y = tf.compat.v1.placeholder(tf.int32, [4], name="y")
        array = graph.create_op("_ListToArray", [x, x], [tf.float32, tf.float32], name="list_to_array",
                                attrs={"Tin": tf.compat.v1.AttrValue(list=tf.compat.v1.AttrValue.ListValue(
                                    type=[tf.float32.as_datatype_enum] * 2)),
                                       "T": tf.compat.v1.AttrValue(type=tf.float32.as_datatype_enum),
                                       "N": tf.compat.v1.AttrValue(i=2)}).outputs
        listed = graph.create_op("_ArrayToList", [y, y], [tf.int32, tf.int32], name="array_to_list",
                                 attrs={"T": tf.compat.v1.AttrValue(type=tf.int32.as_datatype_enum),
                                        "N": tf.compat.v1.AttrValue(i=2),
                                        "out_types": tf.compat.v1.AttrValue(list=tf.compat.v1.AttrValue.ListValue(
                                            type=[tf.int32.as_datatype_enum] * 2))}).outputs
        return [*array, *listed]
    graph_def, fetches = graph_with(build)
    feeds = {"x:0": rand((2, 3)), "y:0": rand((4,), np.int32)}
    got = client.compile(graph_def, {n: (v.dtype, v.shape) for n, v in feeds.items()}, fetches).execute(feeds)
    for g, want in zip(got, [feeds["x:0"], feeds["x:0"], feeds["y:0"], feeds["y:0"]]):
        np.testing.assert_array_equal(g, want)


def test_fake_param_is_zeros_of_its_shape(client):
    """FakeParam stands for a value that is never read; TF has no kernel to compare with, tf2xla gives zeros."""
    def build(graph):
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        fake = graph.create_op("FakeParam", [], [tf.float32], attrs={
            "dtype": tf.compat.v1.AttrValue(type=tf.float32.as_datatype_enum),
            "shape": tf.compat.v1.AttrValue(shape=tf.TensorShape([2, 3]).as_proto())}).outputs[0]
        return [fake + x]
    graph_def, fetches = graph_with(build)
    x = rand((3,))
    got, = client.compile(graph_def, {"x:0": (np.float32, (3,))}, fetches).execute({"x:0": x})
    np.testing.assert_array_equal(got, np.broadcast_to(x, (2, 3)))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_updates_and_rolls(client, dtype):
    """TensorStridedSliceUpdate, ParallelConcat, Roll (with a runtime shift)."""
    def fn(x, value, shift):
        update = raw.TensorStridedSliceUpdate(input=x, begin=tf.constant([1, 0]), end=tf.constant([3, 5]),
                                              strides=tf.constant([1, 2]), value=value)
        return (update, raw.ParallelConcat(values=[x[:1], x[2:3]], shape=[2, 5]),
                raw.Roll(input=x, shift=shift, axis=tf.constant([1, 0, 1])),
                raw.Roll(input=x, shift=tf.constant(-2), axis=tf.constant(1)))
    compile_and_compare(client, fn, [rand((4, 5), dtype), rand((2, 3), dtype), np.array([2, -1, 4], np.int32)])


@pytest.mark.parametrize("op", ["InplaceUpdate", "InplaceAdd", "InplaceSub"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=ids)
def test_inplace(client, op, dtype):
    # TF's kernels update x's buffer in place, so each op gets inputs no other op reads.
    fn = getattr(raw, op)
    compile_and_compare(client, lambda x, v: fn(x=x, i=tf.constant([2, 0]), v=v), [rand((4, 5), dtype),
                                                                                  rand((2, 5), dtype)])


@pytest.mark.parametrize("to", [np.int32, np.uint8, np.float16], ids=ids)
def test_bitcast(client, to):
    compile_and_compare(client, lambda x: raw.Bitcast(input=x, type=tf.as_dtype(to)), [rand((3, 2))])


def test_bitcast_to_a_wider_type(client):
    compile_and_compare(client, lambda x: raw.Bitcast(input=x, type=tf.float32),
                        [rand((3, 4), np.int32).astype(np.uint8)])


def test_identity_like(client):
    compile_and_compare(client, lambda x: (raw.GuaranteeConst(input=x), raw.DeepCopy(x=x)), [rand((3,))])


@pytest.mark.parametrize("formats", [("NHWC", "NCHW"), ("NCHW", "NHWC"), ("NDHWC", "NCDHW")], ids=str)
def test_data_format_permutations(client, formats):
    src, dst = formats
    n = len(src)
    vector = np.arange(10, 10 + n, dtype=np.int32)

    def fn(dims, vector, pairs, spatial):
        return (raw.DataFormatDimMap(x=dims, src_format=src, dst_format=dst),
                raw.DataFormatVecPermute(x=vector, src_format=src, dst_format=dst),
                raw.DataFormatVecPermute(x=pairs, src_format=src, dst_format=dst),
                raw.DataFormatVecPermute(x=spatial, src_format=src, dst_format=dst))
    compile_and_compare(client, fn, [np.arange(-n, n, dtype=np.int32), vector, np.stack([vector, -vector], axis=1),
                                     vector[1:-1]])


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

X23 = np.arange(6, dtype=np.float32).reshape(2, 3)
I32, I64, F32 = np.int32, np.int64, np.float32


# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "sum_axis_twice": ("Sum", {"input": Fed((2, 3)), "reduction_indices": ints(1, -1)}, dict(T=F32, Tidx=I32),
                       {"input": "reduction_indices"}, "names axis 1 twice",
                       lambda: raw.Sum(input=X23, axis=[1, -1])),
    "max_axis_out_of_range": ("Max", {"input": Fed((2, 3)), "reduction_indices": ints(2)}, dict(T=F32, Tidx=I32),
                              {"input": "reduction_indices"}, r"axis 2, out of range .* rank 2",
                              lambda: raw.Max(input=X23, axis=[2])),
    "argmax_over_an_empty_axis": ("ArgMax", {"input": Fed((2, 0)), "dimension": ints(1)[0]},
                                  dict(T=F32, Tidx=I32, output_type=I64), {"input": "input"}, "dimension 1 is empty",
                                  lambda: raw.ArgMax(input=np.zeros((2, 0), F32), dimension=1)),
    "argmax_vector_dimension": ("ArgMax", {"input": Fed((2, 3)), "dimension": ints(1)},
                                dict(T=F32, Tidx=I32, output_type=I64), {"input": "dimension"}, "must have rank 0",
                                lambda: raw.ArgMax(input=X23, dimension=[1])),
    "cumsum_vector_axis": ("Cumsum", {"x": Fed((2, 3)), "axis": ints(1)}, dict(T=F32, Tidx=I32),
                           {"input": "axis"}, "must have rank 0", lambda: raw.Cumsum(x=X23, axis=[1])),
    "strided_slice_zero_stride": ("StridedSlice", {"input": Fed((2, 3)), "begin": ints(0), "end": ints(1),
                                                   "strides": ints(0)}, dict(T=F32, Index=I32),
                                  {"input": "strides"}, "must be non-zero",
                                  lambda: raw.StridedSlice(input=X23, begin=[0], end=[1], strides=[0])),
    "strided_slice_index_out_of_bounds": ("StridedSlice", {"input": Fed((2, 3)), "begin": ints(5), "end": ints(6),
                                                           "strides": ints(1)},
                                          dict(T=F32, Index=I32, shrink_axis_mask=1), {"input": "begin"},
                                          r"begin\[0\] = 5 .* in \[-2, 2\)",
                                          lambda: raw.StridedSlice(input=X23, begin=[5], end=[6], strides=[1],
                                                                   shrink_axis_mask=1)),
    "slice_past_the_end": ("Slice", {"input": Fed((2, 3)), "begin": ints(0, 2), "size": ints(1, 2)},
                           dict(T=F32, Index=I32), {"input": "size"}, r"size\[1\] = 2 does not fit",
                           lambda: raw.Slice(input=X23, begin=[0, 2], size=[1, 2])),
    "split_not_dividing": ("Split", {"split_dim": ints(1)[0], "value": Fed((2, 3))}, dict(T=F32, num_split=2),
                           {"attr": "num_split"}, "does not divide dimension 1",
                           lambda: raw.Split(axis=1, value=X23, num_split=2)),
    "concat_mismatched_shapes": ("ConcatV2", {"a": Fed((2, 3)), "b": Fed((1, 2)), "axis": ints(0)[0]},
                                 dict(T=F32, Tidx=I32, N=2), {"input": "values[1]"}, "agree in every dimension",
                                 lambda: raw.ConcatV2(values=[X23, X23[:1, :2]], axis=0)),
    "pack_axis_out_of_range": ("Pack", {"a": Fed((2, 3)), "b": Fed((2, 3))}, dict(T=F32, N=2, axis=3),
                               {"attr": "axis"}, r"axis=3 is out of range",
                               lambda: raw.Pack(values=[X23, X23], axis=3)),
    "tile_multiples_of_another_rank": ("Tile", {"input": Fed((2, 3)), "multiples": ints(2)},
                                       dict(T=F32, Tmultiples=I32), {"input": "multiples"}, "vector of 2 value",
                                       lambda: raw.Tile(input=X23, multiples=[2])),
    "pad_negative": ("Pad", {"input": Fed((2, 3)), "paddings": np.array([[1, 1], [-1, 0]], I32)},
                     dict(T=F32, Tpaddings=I32), {"input": "paddings"}, "negative",
                     lambda: raw.Pad(input=X23, paddings=[[1, 1], [-1, 0]])),
    "mirror_pad_past_the_edge": ("MirrorPad", {"input": Fed((2, 3)), "paddings": np.array([[1, 1], [3, 0]], I32)},
                                 dict(T=F32, Tpaddings=I32, mode="REFLECT"), {"input": "paddings"},
                                 "must not exceed 2",
                                 lambda: raw.MirrorPad(input=X23, paddings=[[1, 1], [3, 0]], mode="REFLECT")),
    "reverse_axis_twice": ("ReverseV2", {"tensor": Fed((2, 3)), "axis": ints(1, -1)}, dict(T=F32, Tidx=I32),
                           {"input": "axis"}, "names axis 1 twice", lambda: raw.ReverseV2(tensor=X23, axis=[1, -1])),
    "roll_shift_and_axis_of_different_lengths": ("Roll", {"input": Fed((2, 3)), "shift": ints(1, 1),
                                                          "axis": ints(1)}, dict(T=F32, Tshift=I32, Taxis=I32),
                                                 {"input": "shift"}, "one length",
                                                 lambda: raw.Roll(input=X23, shift=[1, 1], axis=[1])),
    "broadcast_args_incompatible": ("BroadcastArgs", {"s0": ints(2, 3), "s1": ints(4)}, dict(T=I32),
                                    {"input": "s1"}, r"incompatible shapes for broadcasting: s0 \[2, 3\], s1 \[4\]",
                                    lambda: raw.BroadcastArgs(s0=[2, 3], s1=[4])),
    "broadcast_to_incompatible": ("BroadcastTo", {"input": Fed((2, 3)), "shape": ints(4, 3)}, dict(T=F32, Tidx=I32),
                                  {"input": "shape"}, "incompatible shapes",
                                  lambda: raw.BroadcastTo(input=X23, shape=[4, 3])),
    "space_to_batch_not_divisible": ("SpaceToBatchND", {"input": Fed((2, 4, 4, 3)), "block_shape": ints(3, 2),
                                                        "paddings": np.zeros((2, 2), I32)},
                                     dict(T=F32, Tblock_shape=I32, Tpaddings=I32), {"input": "paddings"},
                                     r"block_shape \[3, 2\] does not divide",
                                     lambda: raw.SpaceToBatchND(input=np.zeros((2, 4, 4, 3), F32), block_shape=[3, 2],
                                                                paddings=[[0, 0], [0, 0]])),
    "depth_to_space_depth_not_divisible": ("DepthToSpace", {"input": Fed((2, 4, 4, 3))}, dict(T=F32, block_size=2),
                                           {"attr": "block_size"}, "depth 3",
                                           lambda: raw.DepthToSpace(input=np.zeros((2, 4, 4, 3), F32), block_size=2)),
    "unique_v2_two_axes": ("UniqueV2", {"x": X23, "axis": ints(0, 1, dtype=I64)}, dict(T=F32, Taxis=I64),
                           {"input": "axis"}, "at most one axis",
                           lambda: raw.UniqueV2(x=X23, axis=ints(0, 1, dtype=I64))),
    "data_format_vec_permute_of_3": ("DataFormatVecPermute", {"x": Fed((3,), I32)}, dict(T=I32),
                                     {"input": "x"}, "has 3 rows",
                                     lambda: raw.DataFormatVecPermute(x=[1, 2, 3])),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8], ids=ids)
def test_max_and_min_over_an_empty_axis_are_their_identities(client, dtype):
    """-inf (the lowest integer) for Max, +inf (the highest) for Min, as TF; ArgMax over a dimension of an
    empty tensor that leaves no output is fine too."""
    def fn(x):
        return (raw.Max(input=x, axis=[1]), raw.Min(input=x, axis=[1]), raw.Max(input=x, axis=[0, 1], keep_dims=True),
                raw.Min(input=tf.transpose(x), axis=0), raw.ArgMax(input=tf.transpose(x), dimension=1))
    compile_and_compare(client, fn, [np.zeros((2, 0), dtype)])


def test_a_fed_end_of_a_strided_slice_is_named(client):
    """x[1:i]: the slice's length would depend on the fed i, which is the slice's end, not its begin."""
    frozen = freeze(traced(lambda x, i: x[1:i]), *specs_of([rand((4, 3)), np.int32(3)]))
    with pytest.raises(grpc.RpcError) as e:
        client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert error_details(e.value).metadata["input"] == "end" and "'end' must be a compile-time constant" in \
        e.value.details()


@pytest.mark.parametrize("op,inputs,attr_values,input", [
    ("Where", {"input": Fed((3,), np.bool_)}, dict(T=np.bool_), "input"),
    ("Unique", {"x": Fed((3,))}, dict(T=F32, out_idx=I32), "x"),
    ("ListDiff", {"x": Fed((3,)), "y": np.ones(2, F32)}, dict(T=F32, out_idx=I32), "x"),
], ids=["Where", "Unique", "ListDiff"])
def test_ops_whose_shape_depends_on_a_feed_are_unimplemented(client, op, inputs, attr_values, input):
    assert_refused(client, op, inputs, blame={"input": input}, code=grpc.StatusCode.UNIMPLEMENTED,
                   match=f"the shape of the output depends on the values of input '{input}', which depends on a "
                         "feed", **attr_values)

