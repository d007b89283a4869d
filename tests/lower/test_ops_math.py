"""Elementwise, reduction, scan, sorting, broadcasting and product ops against tf.raw_ops, through the service."""
import grpc
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from tests.lower.raw_ops import HALF, compare_per_dtype, has_cpu_kernel, name, op, tolerance
from tests.lower.refusals import Fed, assert_refused, assert_refused_as_tf, one_node
from tests.oracle import assert_close, compile_and_compare, rand, specs_of, traced
from xlacs import freeze
from xlacs_server.lower import registry

MATH_MODULES = {"unary", "bessel", "binary", "broadcast", "math", "reduce", "segment", "sort", "linalg", "matrix_diag",
                "fft", "random"}
MINE = [l for l in registry.registrations() if l.module.rsplit(".", 1)[-1] in MATH_MODULES and l.platform is None]


def registered(op_name):
    return registry.lookup(op_name, "cpu")


def module_ops(module: str, arity: int) -> list[str]:
    return sorted(l.op for l in MINE if l.module.endswith("." + module)
                  and len(op_def_registry.get(l.op).input_arg) == arity)


def dtypes_for(op_name, candidates):
    """The candidate dtypes that both the registration and TF's CPU kernels (the oracle) take."""
    lowering = registered(op_name)
    return [d for d in candidates if np.dtype(d) in lowering.dtypes and has_cpu_kernel(op_name, lowering.type_attr, d)]


def cases(ops, candidates, exclude=()):
    """(op, dtypes) params; ops registered without a dtype constraint (the logical ops) have their own tests."""
    return [pytest.param(o, dtypes_for(o, candidates), id=o) for o in ops if o not in exclude and registered(o).dtypes
            and dtypes_for(o, candidates)]


# ---- unary -------------------------------------------------------------------------------------------------

UNARY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint8, np.complex64]
DOMAINS = {  # op -> (low, high) of the float (and complex parts') inputs; default (-3, 3)
    **dict.fromkeys(["Acos", "Asin", "Atanh", "Erfinv"], (-0.99, 0.99)),
    **dict.fromkeys(["Log", "Sqrt", "Rsqrt"], (0.1, 5)),
    "Acosh": (1.01, 5), "Log1p": (-0.9, 5), "Ndtri": (0.01, 0.99), "Tan": (-1.5, 1.5), "Digamma": (0.1, 6),
    "Lgamma": (-2.9, 6), "Spence": (0, 3), "Softplus": (-30, 30), "Exp": (-10, 10),
}
NONZERO = {"Inv", "Reciprocal", "Xdivy", "Div", "DivNoNan", "FloorDiv", "FloorMod", "TruncateDiv",
           "TruncateMod", "Mod", "RealDiv"}


def nonzero(x):
    return np.where(x == 0, np.ones_like(x), x)


@pytest.mark.parametrize("op_name,dtypes", cases(module_ops("unary", 1), UNARY_DTYPES))
def test_unary(client, op_name, dtypes):
    if op_name == "Round":  # TF's CPU kernel rounds integers to 0; see test_round_integers
        dtypes = [d for d in dtypes if np.dtype(d).kind != "i"]

    def inputs_of(dtype):
        x = rand((2, 3, 4), dtype, *DOMAINS.get(op_name, (-3, 3)))
        return [nonzero(x) if op_name in NONZERO else x]

    def fn_of(dtype):
        complex_part = op_name in ("Real", "Imag", "Angle", "ComplexAbs")
        return op(op_name, **{"Tout": tf.as_dtype(np.real(np.zeros((), dtype)).dtype)} if complex_part else {})
    compare_per_dtype(client, fn_of, inputs_of, dtypes)


@pytest.mark.parametrize("op_name,dtypes", cases(module_ops("bessel", 1), [np.float32, np.float64, np.float16]))
def test_bessel(client, op_name, dtypes):
    """Both sides of x = 2, where the series hands over to the integral, and far out; float64 also at 0 and
    below, where TF's Y is -inf and its K inf."""
    def inputs_of(dtype):
        x = np.concatenate([rand((40,), dtype, -3, 30), np.array([0.1, 1.999, 2.0, 2.001, 45.5], dtype)])
        return [np.concatenate([x, np.array([0.0, -1.0, 1e-30], dtype)]) if dtype == np.float64 else x]
    compare_per_dtype(client, lambda d: op(op_name), inputs_of, dtypes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_unary_special_values(client, dtype):
    """Rounding halves to even, and NaN/inf/-0 flow through the predicates and sign as in TF."""
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, np.nan, np.inf, -np.inf, 1e-30], dtype)
    ops = ["Round", "Rint", "Sign", "IsNan", "IsInf", "IsFinite", "Floor", "Ceil", "Softsign", "Softplus"]
    compile_and_compare(client, lambda x: [op(o)(x) for o in ops], [x])


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=name)
def test_round_integers(client, dtype):
    """Integers round to themselves, as tf.math.round documents; TF's own CPU Round kernel returns 0 for them."""
    frozen = freeze(traced(op("Round")), tf.TensorSpec((3, 4), dtype))
    x = rand((3, 4), dtype, -9, 9)
    (got,) = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, [x])))
    assert_close(got, tf.math.round(x).numpy())


@pytest.mark.parametrize("op_name,dtypes", cases(module_ops("unary", 2), [np.float32, np.float64, np.complex64]))
def test_unary_gradients(client, op_name, dtypes):
    compare_per_dtype(client, lambda d: op(op_name), lambda d: [rand((3, 4), d, 0.1, 0.9), rand((3, 4), d)], dtypes)


def test_logical_not(client):
    compile_and_compare(client, op("LogicalNot"), [rand((3, 4), np.bool_)])


# ---- binary ------------------------------------------------------------------------------------------------

BINARY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.complex64]
BINARY_DOMAINS = {  # op -> ((low, high) of x, (low, high) of y) for float inputs
    **dict.fromkeys(["Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad"], ((0.5, 5), (0.1, 5))),
    "Zeta": ((1.1, 5), (0.5, 3)), "Xlogy": ((-3, 3), (0.1, 5)), "Xlog1py": ((-3, 3), (-0.9, 5)),
    "Pow": ((0.1, 3), (-2, 2)),
}


def binary_inputs(op_name, dtype, shapes=((2, 3, 4), (3, 1))):
    (xl, xh), (yl, yh) = BINARY_DOMAINS.get(op_name, ((-5, 5), (-5, 5)))
    if np.dtype(dtype).kind in "iu" and op_name == "Pow":
        (xl, xh), (yl, yh) = (-3, 3), (0, 3)
    if np.dtype(dtype).kind in "iu" and op_name in ("LeftShift", "RightShift"):
        (yl, yh) = (0, np.iinfo(dtype).bits - 1)
    x, y = rand(shapes[0], dtype, xl, xh), rand(shapes[1], dtype, yl, yh)
    if op_name in ("Xlogy", "Xlog1py", "Xdivy", "MulNoNan", "DivNoNan"):
        x.flat[::3] = 0  # the ops' special case
    if op_name in ("DivNoNan", "MulNoNan"):
        y.flat[::2] = 0
    return x, nonzero(y) if op_name in NONZERO - {"DivNoNan"} else y


@pytest.mark.parametrize("op_name,dtypes", cases(module_ops("binary", 2), BINARY_DTYPES,
                                                 exclude={"Polygamma", "Complex", "ApproximateEqual"}))
def test_binary(client, op_name, dtypes):
    compare_per_dtype(client, lambda d: op(op_name), lambda d: list(binary_inputs(op_name, d)), dtypes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_polygamma(client, dtype):
    n = np.array([[0], [1], [2], [3]], dtype)
    compile_and_compare(client, op("Polygamma"), [n, rand((4, 5), dtype, 0.5, 5)], **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.float32, np.float64], ids=name)
def test_division_and_modulo_signs(client, dtype):
    """Every sign combination, exact multiples and a dividend smaller than the divisor."""
    x, y = np.array([7, -7, 7, -7, 6, -6, 3, -3, 0]), np.array([2, 2, -2, -2, 3, -3, 5, 5, 4])
    if np.dtype(dtype).kind == "u":
        x, y = x[(x >= 0) & (y > 0)], y[(x >= 0) & (y > 0)]
    x, y = x.astype(dtype), y.astype(dtype)
    ops = [o for o in ("Div", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod")
           if np.dtype(dtype) in registered(o).dtypes]
    if np.dtype(dtype).kind == "f":
        x, y = x * 1.5, y * 1.25
    compile_and_compare(client, lambda x, y: [op(o)(x, y) for o in ops], [x, y])


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64], ids=name)
def test_shifts_clamp_the_amount(client, dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([1, 1, 1, 64, 3, 5], dtype)
    y = np.array([0, bits - 1, bits + 3, 2, 0, 1], dtype)
    if np.dtype(dtype).kind == "i":
        x, y = np.append(x, [-64, -1]).astype(dtype), np.append(y, [-1, bits]).astype(dtype)
    compile_and_compare(client, lambda x, y: [op("LeftShift")(x, y), op("RightShift")(x, y)], [x, y])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=name)
def test_equality(client, dtype):
    x, y = rand((3, 4), dtype, -2, 2), rand((4,), dtype, -2, 2)
    compile_and_compare(client, lambda x, y: [op("Equal")(x, y), op("NotEqual")(x, y)], [x, y])


def test_equality_of_incompatible_shapes(client):
    fn = lambda x, y: [op("Equal", incompatible_shape_error=False)(x, y),  # noqa: E731
                       op("NotEqual", incompatible_shape_error=False)(x, y)]
    compile_and_compare(client, fn, [rand((3, 4)), rand((2,))])


@pytest.mark.parametrize("op_name", ["LogicalAnd", "LogicalOr"])
def test_logical(client, op_name):
    compile_and_compare(client, op(op_name), [rand((3, 4), np.bool_), rand((4,), np.bool_)])


@pytest.mark.parametrize("dtype", dtypes_for("ApproximateEqual", [np.float32, np.float64, np.int32, np.complex64]),
                         ids=name)
def test_approximate_equal(client, dtype):
    x = rand((3, 4), dtype)
    y = x + np.where(rand((3, 4), np.bool_), 2, 0).astype(dtype)
    compile_and_compare(client, op("ApproximateEqual", tolerance=0.01), [x, y])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=name)
def test_complex(client, dtype):
    real = np.real(np.zeros((), dtype)).dtype
    compile_and_compare(client, op("Complex", Tout=tf.as_dtype(dtype)), [rand((3, 4), real), rand((4,), real)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_betainc(client, dtype):
    compile_and_compare(client, op("Betainc"), [rand((3, 4), dtype, 0.5, 5), rand((3, 4), dtype, 0.5, 5),
                                                rand((3, 4), dtype, 0.01, 0.99)], **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64], ids=name)
def test_add_n(client, dtype):
    compile_and_compare(client, lambda a, b, c: tf.raw_ops.AddN(inputs=[a, b, c]), [rand((3, 4), dtype)
                                                                                    for _ in range(3)])


def test_accumulate_n_v2(client):
    """TF has no kernel for AccumulateNV2 (a graph pass rewrites it), but frozen graphs can hold it: AddN's twin."""
    spec = tf.TensorSpec((3, 4), tf.float32)
    frozen = freeze(traced(lambda a, b: tf.raw_ops.AccumulateNV2(inputs=[a, b], shape=[3, 4])), spec, spec)
    a, b = rand((3, 4)), rand((3, 4))
    (got,) = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, [a, b])))
    assert_close(got, tf.raw_ops.AddN(inputs=[a, b]).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8], ids=name)
def test_clip_by_value(client, dtype):
    t = rand((3, 4), dtype, 0, 10)
    compile_and_compare(client, lambda t, lo, hi: [op("ClipByValue")(t, lo, hi), op("ClipByValue")(t, lo[0, 0], 7)],
                        [t, rand((3, 4), dtype, 0, 4), rand((3, 4), dtype, 5, 9)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=name)
def test_select(client, dtype):
    """Select's vector condition picks rows; SelectV2 broadcasts all three operands."""
    def fn(c, rows, t, e):
        return op("Select")(c, t, e), op("Select")(rows, t, e), op("Select")(c[0, 0, 0], t, e), \
            op("SelectV2")(rows[:, None, None], t, e[0])
    compile_and_compare(client, fn, [rand((2, 3, 4), np.bool_), rand((2,), np.bool_), rand((2, 3, 4), dtype),
                                     rand((2, 3, 4), dtype)])


# ---- broadcasting ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((2, 1, 3), (4, 1)), ((5,), (5,)), ((1, 1), (1,)), ((), (2, 3)),
                                    ((2, 1), (1, 1))], ids=str)
def test_broadcast_shapes(client, shapes):
    """BroadcastArgs and BroadcastGradientArgs of constant shapes fold, so their result can shape a tensor."""
    a, b = (np.zeros(s, np.float32) for s in shapes)

    def fn(a, b):
        out = tf.raw_ops.BroadcastArgs(s0=tf.shape(a), s1=tf.shape(b))
        r0, r1 = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(a), s1=tf.shape(b, out_type=tf.int32))
        return out, r0, r1, tf.raw_ops.BroadcastTo(input=a, shape=out), tf.reduce_sum(a + b, axis=r0)
    compile_and_compare(client, fn, [a + rand(shapes[0]), b + rand(shapes[1])])


@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.int64], ids=name)
def test_broadcast_to(client, dtype):
    compile_and_compare(client, lambda x: tf.raw_ops.BroadcastTo(input=x, shape=tf.constant([2, 3, 4], tf.int64)),
                        [rand((3, 1), dtype)])


# ---- reductions and scans ----------------------------------------------------------------------------------

REDUCE_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint8, np.complex64]


@pytest.mark.parametrize("op_name,dtypes", cases(["Sum", "Prod", "Mean", "Max", "Min", "EuclideanNorm"],
                                                 REDUCE_DTYPES))
def test_reductions(client, op_name, dtypes):
    """Over one axis, a negative one, none, all, with and without keep_dims, int32 and int64 axes."""
    def inputs_of(dtype):
        low, high = (0.5, 1.5) if op_name == "Prod" else (0, 9) if np.dtype(dtype).kind == "u" else (-3, 3)
        return [rand((2, 3, 4), dtype, low, high)]

    def fn_of(dtype):
        return lambda x: [op(op_name, keep_dims=keep)(x, tf.constant(axis, index))
                          for axis, keep, index in [([0], False, tf.int32), ([1, -1], True, tf.int64),
                                                    ([], False, tf.int32), ([0, 1, 2], True, tf.int32),
                                                    ([2, 0], False, tf.int64)]]
    compare_per_dtype(client, fn_of, inputs_of, dtypes)


def test_integer_mean_sums_in_64_bits(client):
    """TF sums integers in int64 (uint64 for the unsigned types) and divides with truncation before casting back:
    the mean of the largest values is the largest value, not a wrapped sum halved; a negative mean rounds up."""
    def inputs_of(dtype):
        info = np.iinfo(dtype)
        rows = ([[info.max] * 3, [info.min, info.min, 1], [-7, 2, 0], [info.max, info.min, -3]] if info.min else
                [[info.max] * 3, [info.max, 1, 0], [7, 2, 0], [info.max, info.max - 1, 3]])
        return [np.array(rows, dtype)]

    def fn_of(dtype):
        return lambda x: [tf.raw_ops.Mean(input=x, axis=axis, keep_dims=keep)
                          for axis, keep in [([1], False), ([0], True), ([0, 1], False)]]
    compare_per_dtype(client, fn_of, inputs_of, dtypes_for("Mean", [np.int8, np.int16, np.int32, np.int64,
                                                                    np.uint8, np.uint16, np.uint32, np.uint64]))


@pytest.mark.parametrize("dtype", HALF, ids=name)
def test_half_precision_reductions_accumulate_in_float32(client, dtype):
    """Sum, Mean and Prod of float16 and bfloat16 accumulate in float32 and round once, as tf2xla does
    (XlaHelpers::SumAccumulationType): a float16 sum through its largest value (65504) does not overflow, a
    thousand tenths sum to 100 (not 99.6 in float16, 98 in bfloat16), 300 * 300 / 300 / 300 is 1 (not inf).
    TF's CPU kernels accumulate in T (inf, 99.75, inf in float16), so the oracle is TF's XLA path."""
    def fn(big, tenths, ratios):  # keep_dims: TF's scalar bfloat16 tensors do not convert to NumPy arrays
        reduced = [("Sum", big), ("Mean", big), ("Sum", tenths), ("Mean", tenths), ("Prod", ratios)]
        return [op(op_name, keep_dims=True)(x, [0]) for op_name, x in reduced]
    args = [np.array([65504, 65504, -65504], dtype), np.full((1000,), 0.1, dtype),
            np.array([300, 300, 1 / 300, 1 / 300], dtype)]
    compile_and_compare(client, fn, args, rtol=float(ml_dtypes.finfo(dtype).eps), atol=0,
                        oracle=tf.function(fn, jit_compile=True))


def test_chained_float32_sums_of_a_large_input(client):
    """Sums of sums over 16M float32 values that cancel (centred normals). XLA:CPU adds in another order than
    TF's Eigen kernels, both in float32 (tf2xla does not widen float32 either), so the results differ by rounding,
    and a sum that cancels magnifies it relative to the result. Measured on this input: the whole sum (1.5e-3)
    differs from TF's CPU kernels by 6.6e-3 of itself through xlacs and by 0.11 through TF's own XLA path;
    relative to the sum of |x| (the scale of a sum's rounding error) by 4.9e-10 and 8.0e-9, the row sums by 2.0e-8
    and 2.8e-8. On 4096x4096, 512x8192 and 16x2^20 inputs (normal, centred, uniform, offset by 100) xlacs stayed
    within 2.4e-7 of the sum of |x| (2 float32 ulps), TF's XLA path within 3.3e-6. So the tolerance is 4 float32
    ulps of the sum of |x|, per output: twice the most that xlacs differed by."""
    x = np.random.default_rng(0).normal(size=(4096, 4096))
    x = (x - x.mean()).astype(np.float32)

    def fn(x):
        return [tf.raw_ops.Sum(input=tf.raw_ops.Sum(input=x, axis=[1]), axis=[0]), tf.raw_ops.Sum(input=x, axis=[1]),
                tf.raw_ops.Mean(input=tf.raw_ops.Mean(input=x, axis=[1]), axis=[0])]
    frozen = freeze(traced(fn), *specs_of([x]))
    got = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, [x])))
    magnitude = np.abs(x).astype(np.float64)
    for g, w, scale in zip(got, fn(tf.constant(x)), [magnitude.sum(), magnitude.sum(axis=1), magnitude.mean()]):
        np.testing.assert_allclose(g, np.asarray(w), rtol=0, atol=4 * np.finfo(np.float32).eps * np.max(scale))


@pytest.mark.parametrize("op_name", ["All", "Any"])
def test_logical_reductions(client, op_name):
    compile_and_compare(client, lambda x: [op(op_name)(x, tf.constant([1])), op(op_name, keep_dims=True)(x, [0, 2]),
                                           op(op_name)(x, tf.constant([], tf.int32))],
                        [rand((2, 3, 4), np.bool_)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_], ids=name)
@pytest.mark.parametrize("op_name", ["ArgMax", "ArgMin"])
def test_arg_reductions(client, op_name, dtype):
    x = rand((3, 4, 5), dtype, 0, 3)  # small integer range: ties, which go to the lowest index
    compile_and_compare(client, lambda x: [op(op_name)(x, tf.constant(1)), op(op_name, output_type=tf.int32)(x, -1),
                                           op(op_name)(x, tf.constant(0, tf.int64))], [x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=name)
def test_l2_loss(client, dtype):
    compile_and_compare(client, op("L2Loss"), [rand((3, 4), dtype)], **tolerance(dtype))


@pytest.mark.parametrize("op_name,dtypes", cases(["Cumsum", "Cumprod", "CumulativeLogsumexp"],
                                                 [np.float32, np.float64, np.int32, np.complex64]))
def test_cumulative(client, op_name, dtypes):
    """Every combination of exclusive and reverse, along a middle and a negative axis."""
    def inputs_of(dtype):
        return [rand((3, 4, 5), dtype, 0.5, 1.5) if op_name == "Cumprod" else rand((3, 4, 5), dtype)]

    def fn_of(dtype):
        return lambda x: [op(op_name, exclusive=exclusive, reverse=reverse)(x, axis)
                          for exclusive in (False, True) for reverse in (False, True)
                          for axis in (tf.constant(1), tf.constant(-1, tf.int64))]
    compare_per_dtype(client, fn_of, inputs_of, dtypes)


# ---- segment reductions and counting -----------------------------------------------------------------------

@pytest.mark.parametrize("op_name,dtypes", cases(["SegmentSum", "SegmentProd", "SegmentMax", "SegmentMin",
                                                  "SegmentMean"], [np.float32, np.int32, np.complex64]))
def test_segment_reductions(client, op_name, dtypes):
    """Sorted ids with a gap (an empty segment) and 2-D data; the output length comes from the constant ids."""
    ids = tf.constant([0, 0, 1, 3, 3, 3], tf.int64)
    compare_per_dtype(client, lambda d: lambda x: op(op_name)(x, ids), lambda d: [rand((6, 4), d, 1, 3)], dtypes)


@pytest.mark.parametrize("op_name,dtypes", cases(["UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMax",
                                                  "UnsortedSegmentMin"], [np.float32, np.int32, np.uint8]))
def test_unsorted_segment_reductions(client, op_name, dtypes):
    """Unordered 2-D ids, a negative (dropped) id, and empty segments, which hold the reduction's identity."""
    ids = np.array([[2, 0, -1], [2, 4, 0]], np.int32)
    compare_per_dtype(client, lambda d: lambda x, ids: op(op_name)(x, ids, tf.constant(6)),
                      lambda d: [rand((2, 3, 4), d, 1, 3), ids], dtypes)


@pytest.mark.parametrize("dtype", [np.int32, np.float32], ids=name)
def test_bincount(client, dtype):
    """Values past the size are ignored; empty weights count; DenseBincount counts per row of a matrix."""
    arr = np.array([[0, 1, 1, 5, 3], [2, 2, 9, 7, 0]], np.int32)
    weights = rand((2, 5), dtype, 0, 4)

    def fn(arr, weights):
        size = tf.constant(6)
        return [tf.raw_ops.Bincount(arr=arr, size=size, weights=weights),
                tf.raw_ops.Bincount(arr=arr, size=size, weights=tf.zeros([0], dtype)),
                tf.raw_ops.DenseBincount(input=arr, size=size, weights=weights),
                tf.raw_ops.DenseBincount(input=arr[0], size=size, weights=tf.zeros([0], dtype), binary_output=True)]
    compile_and_compare(client, fn, [arr, weights])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=name)
def test_histogram_fixed_width(client, dtype):
    values = np.concatenate([rand((40,), dtype, -2, 12), np.array([0, 10, -5, 15, 5], dtype)])
    compile_and_compare(client, lambda v, r: [op("HistogramFixedWidth")(v, r, tf.constant(7)),
                                              op("HistogramFixedWidth", dtype=tf.int64)(v, r, tf.constant(3))],
                        [values, np.array([0, 10], dtype)])


# ---- sorting and searching ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16], ids=name)
def test_top_k(client, dtype):
    """Values with ties; k = the full size is how tf.sort and tf.argsort use TopKV2."""
    def fn(x):
        v, i = tf.raw_ops.TopKV2(input=x, k=tf.constant(3))
        v64, i64 = tf.raw_ops.TopKV2(input=x, k=tf.constant(6, tf.int64), index_type=tf.int64)
        return v, i, v64, i64, tf.sort(x, direction="ASCENDING"), tf.argsort(x, stable=True)
    compile_and_compare(client, fn, [rand((2, 4, 6), dtype, 0, 9)])


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=name)
def test_approx_top_k(client, dtype):
    """Exact on CPU, like TF's CPU kernel (which only takes the top k along the last dimension)."""
    compile_and_compare(client, lambda x: list(op("ApproxTopK", k=3)(x)), [rand((6, 9), dtype)])


def test_in_top_k(client):
    """Ties count for the target; a target out of range or a non-finite score makes the answer false."""
    predictions = np.array([[0.1, 0.5, 0.5, 0.2], [0.3, 0.3, 0.3, 0.3], [0.9, np.nan, 0.1, 0.2],
                            [0.4, 0.3, 0.2, 0.1], [1, 2, 3, 4]], np.float32)

    def fn(p, t, k):
        return [tf.raw_ops.InTopKV2(predictions=p, targets=t, k=k), tf.raw_ops.InTopK(predictions=p, targets=t, k=1),
                tf.raw_ops.InTopKV2(predictions=p, targets=tf.cast(t, tf.int64), k=tf.constant(2, tf.int64))]
    for k in (1, 2, 3):
        compile_and_compare(client, fn, [predictions, np.array([2, 3, 0, 5, 2], np.int32), np.array(k, np.int32)])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=name)
def test_nth_element(client, dtype, reverse):
    compile_and_compare(client, lambda x: [op("NthElement", reverse=reverse)(x, tf.constant(n)) for n in (0, 2, 4)],
                        [rand((2, 3, 5), dtype, 0, 9)])


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=name)
def test_bounds(client, dtype):
    """tf.searchsorted: per row, with values equal to entries (where left and right differ)."""
    sorted_inputs = np.sort(rand((3, 8), dtype, 0, 9), axis=-1)
    values = np.concatenate([sorted_inputs[:, ::3], rand((3, 4), dtype, -1, 10)], axis=-1)
    compile_and_compare(client, lambda s, v: [tf.searchsorted(s, v, side="left"), tf.searchsorted(s, v, side="right"),
                                              op("UpperBound", out_type=tf.int64)(s, v)], [sorted_inputs, values])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64], ids=name)
def test_bucketize(client, dtype):
    """Values on the boundaries go up; float64 values compare against the float32 boundaries in double."""
    x = np.concatenate([rand((10,), dtype, -5, 5), np.array([-1, 0, 2, 3, 0.1], dtype)])
    compile_and_compare(client, op("Bucketize", boundaries=[-1.0, 0.0, 0.1, 2.0, 3.5]), [x])


# ---- products ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64, np.float16], ids=name)
def test_matmul_dtypes(client, dtype):
    compile_and_compare(client, lambda a, b: [tf.raw_ops.MatMul(a=a, b=b, transpose_b=True),
                                              tf.raw_ops.BatchMatMulV2(x=a[None], y=b[None], adj_y=True)],
                        [rand((3, 4), dtype), rand((5, 4), dtype)], **tolerance(dtype))


@pytest.mark.parametrize("ta,tb,tout", [(np.int8, np.uint8, np.int32), (np.float64, np.float64, np.float64),
                                        (ml_dtypes.bfloat16, np.int8, ml_dtypes.bfloat16)], ids=str)
def test_batch_matmul_v3(client, ta, tb, tout):
    fn = lambda x, y: tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=tf.as_dtype(tout), adj_x=True)  # noqa: E731
    compile_and_compare(client, fn, [rand((2, 4, 3), ta), rand((1, 4, 5), tb)], **tolerance(tout))


@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, True)])
def test_sparse_matmul(client, transpose_a, transpose_b):
    a = rand((4, 3) if transpose_a else (3, 4))
    b = rand((5, 4) if transpose_b else (4, 5))
    compile_and_compare(client, lambda a, b: tf.raw_ops.SparseMatMul(a=a, b=b, transpose_a=transpose_a,
                                                                     transpose_b=transpose_b, a_is_sparse=True), [a, b])


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(4, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]), ("abc->cba", [(2, 3, 4)]), ("ij->", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("i,j->ij", [(3,), (4,)])], ids=lambda v: str(v))
def test_einsum(client, equation, shapes):
    compile_and_compare(client, lambda *xs: tf.raw_ops.Einsum(inputs=list(xs), equation=equation),
                        [rand(s) for s in shapes])


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=name)
def test_cross(client, dtype):
    compile_and_compare(client, op("Cross"), [rand((2, 4, 3), dtype), rand((2, 4, 3), dtype)])


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

X23 = np.arange(6, dtype=np.float32).reshape(2, 3)
F32 = np.float32

# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "mat_mul_inner_dimensions": ("MatMul", {"a": Fed((2, 3)), "b": np.ones((4, 5), F32)}, dict(T=F32),
                                 {"input": "b"}, r"input 'a' \[2, 3\] times input 'b' \[4, 5\]",
                                 lambda: tf.raw_ops.MatMul(a=X23, b=np.ones((4, 5), F32))),
    "mat_mul_of_vectors": ("MatMul", {"a": Fed((3,)), "b": np.ones((3, 5), F32)}, dict(T=F32),
                           {"input": "a"}, "must have rank 2",
                           lambda: tf.raw_ops.MatMul(a=np.ones((1, 3), F32)[0], b=np.ones((3, 5), F32))),
    "batch_mat_mul_batches": ("BatchMatMulV2", {"x": Fed((2, 2, 3)), "y": np.ones((3, 3, 4), F32)}, dict(T=F32),
                              {"input": "y"}, "incompatible shapes for broadcasting",
                              lambda: tf.raw_ops.BatchMatMulV2(x=np.ones((2, 2, 3), F32), y=np.ones((3, 3, 4), F32))),
    "add_incompatible_shapes": ("AddV2", {"x": Fed((2, 3)), "y": np.ones(4, F32)}, dict(T=F32),
                                {"input": "y"}, r"incompatible shapes for broadcasting: x \[2, 3\], y \[4\]",
                                lambda: tf.raw_ops.AddV2(x=X23, y=np.ones(4, F32))),
    "atan2_names_its_inputs_y_and_x": ("Atan2", {"y": Fed((2, 3)), "x": np.ones(4, F32)}, dict(T=F32),
                                       {"input": "x"}, r"y \[2, 3\], x \[4\]",
                                       lambda: tf.raw_ops.Atan2(y=X23, x=np.ones(4, F32))),
    "add_n_shapes": ("AddN", {"a": Fed((2, 3)), "b": np.ones((3, 2), F32)}, dict(T=F32, N=2),
                     {"input": "inputs:1"}, "every input must have the same shape",
                     lambda: tf.raw_ops.AddN(inputs=[X23, np.ones((3, 2), F32)])),
    "select_t_and_e": ("Select", {"c": np.ones((2, 3), bool), "t": Fed((2, 3)), "e": np.ones((3, 2), F32)},
                       dict(T=F32), {"input": "e"}, "must have the same shape",
                       lambda: tf.raw_ops.Select(condition=np.ones((2, 3), bool), x=X23, y=np.ones((3, 2), F32))),
    "clip_bounds_shape": ("ClipByValue", {"t": Fed((2, 3)), "lo": np.zeros(3, F32), "hi": np.float32(1)},
                          dict(T=F32), {"input": "clip_value_min"}, "must be a scalar or have the shape of 't'",
                          lambda: tf.raw_ops.ClipByValue(t=X23, clip_value_min=np.zeros(3, F32),
                                                         clip_value_max=np.float32(1))),
    "einsum_label_sizes": ("Einsum", {"a": Fed((2, 3)), "b": np.ones((4, 5), F32)},
                           dict(T=F32, N=2, equation="ij,jk->ik"), {"input": "inputs:1"},
                           "label 'j' .* has size 4 in input 'inputs:1'",
                           lambda: tf.raw_ops.Einsum(inputs=[X23, np.ones((4, 5), F32)], equation="ij,jk->ik")),
    "einsum_without_output": ("Einsum", {"a": Fed((2, 3)), "b": np.ones((3, 5), F32)},
                              dict(T=F32, N=2, equation="ij,jk"), {"attr": "equation"}, "'terms->output'",
                              lambda: tf.raw_ops.Einsum(inputs=[X23, np.ones((3, 5), F32)], equation="ij,jk")),
    "sigmoid_grad_shapes": ("SigmoidGrad", {"y": Fed((2, 3)), "dy": np.ones(3, F32)}, dict(T=F32),
                            {"input": "dy"}, r"input 'dy' has shape \[3\], but 'y' has \[2, 3\]",
                            lambda: tf.raw_ops.SigmoidGrad(y=X23, dy=np.ones(3, F32))),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


def test_an_input_of_another_dtype_than_t_is_invalid_argument(client):
    """TF refuses such a graph when it imports it; the lowering names the input and the attr."""
    graph_def, _, _ = one_node("AddV2", {"x": Fed((2, 3)), "y": np.ones(3, np.int32)}, T=F32)
    with pytest.raises(ValueError, match="incompatible with expected float"):
        tf.graph_util.import_graph_def(tf.compat.v1.GraphDef.FromString(graph_def), name="")
    assert_refused(client, "AddV2", {"x": Fed((2, 3)), "y": np.ones(3, np.int32)}, blame={"input": "y"},
                   match="input 'y' has dtype int32, but T is float32", T=F32)


def test_einsum_output_label_no_input_has_is_unimplemented(client):
    """TF runs "ij,jk->iz" (z is dropped); xlacs refuses it as not lowered rather than guess."""
    tf.raw_ops.Einsum(inputs=[X23, np.ones((3, 5), F32)], equation="ij,jk->iz")
    assert_refused(client, "Einsum", {"a": Fed((2, 3)), "b": np.ones((3, 5), F32)}, blame={"attr": "equation"},
                   code=grpc.StatusCode.UNIMPLEMENTED, match="has one no input has", T=F32, N=2,
                   equation="ij,jk->iz")
