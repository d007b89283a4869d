"""The FFT family against tf.raw_ops, through the service: complex and real transforms over 1-3 inner dims."""
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.raw_ops import name, op, tolerance
from tests.lower.refusals import Fed, assert_refused_as_tf, ints
from tests.oracle import assert_close, compile_and_compare, rand, specs_of, traced
from xlacs import freeze

SUFFIXES = {1: "", 2: "2D", 3: "3D"}


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=name)
def test_complex_fft(client, dtype, rank):
    x = rand((2, 3, 4, 5), dtype)
    suffix = SUFFIXES[rank]
    compile_and_compare(client, lambda x: [op("FFT" + suffix)(x), op("IFFT" + suffix)(x)], [x], **tolerance(dtype))


@pytest.mark.parametrize("lengths", ["same", "cropped", "odd"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_real_fft(client, dtype, rank, lengths):
    """fft_length crops the input (IRFFT's innermost dimension to fft_length // 2 + 1). TF's CPU kernels reject
    an input shorter than fft_length (tf.signal pads it first), so padding is not compared with TF."""
    shape = (2, 6, 5, 8)
    inner = np.array(shape[-rank:])
    fft_length = {"same": inner, "cropped": inner - 2, "odd": inner - 1 + inner % 2}[lengths].astype(np.int32)
    complex_dtype = tf.complex64 if dtype == np.float32 else tf.complex128
    suffix = SUFFIXES[rank]

    def fn(x, spectrum):
        return [op("RFFT" + suffix, Tcomplex=complex_dtype)(x, tf.constant(fft_length)),
                op("IRFFT" + suffix, Treal=tf.as_dtype(dtype))(spectrum, tf.constant(fft_length))]
    spectrum_dtype = np.complex64 if dtype == np.float32 else np.complex128
    compile_and_compare(client, fn, [rand(shape, dtype), rand(shape, spectrum_dtype)], **tolerance(dtype))


def test_fft_length_from_the_input_shape_stays_constant(client):
    """fft_length computed from tf.shape folds to the compile-time constant the lowering needs."""
    def fn(x):
        length = tf.shape(x)[-1:] - 2
        return op("IRFFT")(op("RFFT")(x, length), length)
    compile_and_compare(client, fn, [rand((3, 8))])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_nd_forms_over_given_axes(client, dtype):
    """TF has no CPU kernels for FFTND and its kin: over the innermost axes they must equal the 2D/3D ops, and
    over other axes the 2D ops applied to transposed inputs (all run by TF)."""
    complex_dtype = np.complex64 if dtype == np.float32 else np.complex128
    x, spectrum = rand((2, 6, 5, 8), complex_dtype), rand((2, 6, 5, 8), complex_dtype)
    real = rand((2, 6, 5, 8), dtype)
    tcomplex, treal = tf.as_dtype(complex_dtype), tf.as_dtype(dtype)
    inner2, inner3 = tf.constant([-2, -1]), tf.constant([1, 2, 3])
    frozen = freeze(traced(lambda x, spectrum, real: [
        op("FFTND")(x, tf.constant([5, 8]), inner2), op("IFFTND")(x, tf.constant([6, 5, 8]), inner3),
        op("FFTND")(x, tf.constant([6, 8]), tf.constant([1, 3])),
        op("RFFTND", Tcomplex=tcomplex)(real, tf.constant([5, 6]), inner2),
        op("IRFFTND", Treal=treal)(spectrum, tf.constant([6, 5, 10]), inner3)]), *specs_of([x, spectrum, real]))
    got = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(
        dict(zip(frozen.feeds, [x, spectrum, real])))
    x, spectrum, real = tf.constant(x), tf.constant(spectrum), tf.constant(real)
    swapped = tf.transpose(x, [0, 2, 1, 3])
    want = [tf.signal.fft2d(x), tf.signal.ifft3d(x), tf.transpose(tf.signal.fft2d(swapped), [0, 2, 1, 3]),
            op("RFFT2D", Tcomplex=tcomplex)(real, tf.constant([5, 6])),
            op("IRFFT3D", Treal=treal)(spectrum, tf.constant([6, 5, 10]))]
    for g, w in zip(got, want):
        assert_close(g, w.numpy(), **tolerance(dtype))


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input at fault ---------------------------

C64, F32 = np.complex64, np.float32

# id -> (op, inputs, attrs, blamed {"input": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "fft_of_a_scalar": ("FFT", {"input": Fed((), C64)}, dict(Tcomplex=C64), {"input": "input"}, "rank at least 1",
                        lambda: tf.raw_ops.FFT(input=C64(1))),
    "fft2d_of_a_vector": ("FFT2D", {"input": Fed((3,), C64)}, dict(Tcomplex=C64), {"input": "input"},
                          "rank at least 2", lambda: tf.raw_ops.FFT2D(input=np.zeros(3, C64))),
    "rfft_two_lengths": ("RFFT", {"input": Fed((4,)), "fft_length": ints(4, 4)}, dict(Treal=F32, Tcomplex=C64),
                         {"input": "fft_length"}, "must hold 1 positive length",
                         lambda: tf.raw_ops.RFFT(input=np.zeros(4, F32), fft_length=[4, 4])),
    "rfft_negative_length": ("RFFT", {"input": Fed((4,)), "fft_length": ints(-1)}, dict(Treal=F32, Tcomplex=C64),
                             {"input": "fft_length"}, "positive length",
                             lambda: tf.raw_ops.RFFT(input=np.zeros(4, F32), fft_length=[-1])),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])
