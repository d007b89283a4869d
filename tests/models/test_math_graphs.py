"""Graphs written with TF's public linalg, signal and top-k APIs, frozen both ways, compiled through the service
and compared with TensorFlow."""
import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import compile_and_compare

LOWER = pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
rng = np.random.default_rng(0)


def linear_algebra(x, rhs):
    """Cholesky solves, determinants, inverses, eigen- and singular values, QR, bands and traces of a batch."""
    eye = tf.eye(x.shape[-1], batch_shape=x.shape[:-2])
    spd = tf.matmul(x, x, transpose_b=True) + 4.0 * eye
    chol = tf.linalg.cholesky(spd)
    _, log_abs_det = tf.linalg.slogdet(x + 3.0 * eye)
    r = tf.linalg.qr(x)[1]
    return [tf.linalg.cholesky_solve(chol, rhs), tf.linalg.logdet(spd), tf.linalg.det(x), log_abs_det,
            tf.linalg.inv(spd), tf.linalg.solve(x + 3.0 * eye, rhs), tf.linalg.eigvalsh(spd),
            tf.linalg.svd(x, compute_uv=False), tf.abs(tf.linalg.diag_part(r)), tf.linalg.lstsq(x + 3.0 * eye, rhs),
            tf.linalg.trace(spd), tf.linalg.band_part(spd, 1, 0), tf.linalg.set_diag(x, tf.linalg.diag_part(spd)),
            tf.einsum("bij,bjk->bik", tf.linalg.triangular_solve(chol, rhs), tf.transpose(rhs, [0, 2, 1])),
            tf.linalg.norm(x, axis=[-2, -1]), tf.linalg.cross(x[..., :3], x[..., 2:])]


def spectrum(signal):
    """STFT magnitudes, a real round trip, and the 2-D spectrum of a complex image."""
    stft = tf.signal.stft(signal, frame_length=32, frame_step=16, fft_length=32)
    image = tf.complex(signal[:, :64], signal[:, 64:128])
    image = tf.reshape(image, [-1, 8, 8])
    spectrum2d = tf.signal.fft2d(image)
    round_trip = tf.signal.irfft(tf.signal.rfft(signal))
    return [tf.abs(stft), tf.math.angle(tf.signal.rfft(signal[:, :40], fft_length=[32])),
            round_trip, tf.math.real(tf.signal.ifft2d(spectrum2d)), tf.abs(spectrum2d)]


def ranking(logits, labels):
    """Top-k, in-top-k, sorting, argmax, cumulative sums, log-sum-exp, segment sums and search."""
    values, indices = tf.math.top_k(logits, k=5)
    order = tf.argsort(logits, axis=-1, direction="DESCENDING", stable=True)
    cdf = tf.math.cumsum(tf.nn.softmax(tf.sort(logits, direction="DESCENDING")), axis=-1)
    return [values, indices, tf.math.in_top_k(labels, logits, k=3), order, tf.argmax(logits, axis=-1),
            tf.searchsorted(cdf, tf.fill([logits.shape[0], 2], 0.5)), tf.math.reduce_logsumexp(logits, axis=-1),
            tf.math.unsorted_segment_max(logits, labels % 3, num_segments=3), tf.math.cumprod(values, exclusive=True)]


def spectral_classifier(signal, weights):
    """The three together: spectral features through a linear map, whitened by a Cholesky solve, ranked."""
    features = tf.reduce_mean(tf.abs(tf.signal.stft(signal, frame_length=32, frame_step=16)), axis=1)
    gram = tf.matmul(features, features, transpose_a=True) / features.shape[0] + tf.eye(features.shape[1])
    whitened = tf.transpose(tf.linalg.triangular_solve(tf.linalg.cholesky(gram), tf.transpose(features)))
    logits = tf.matmul(whitened, weights)
    values, indices = tf.math.top_k(logits, k=3)
    return values, indices, tf.nn.log_softmax(logits)


@LOWER
def test_linear_algebra(client, lower_control_flow):
    x = rng.normal(size=(3, 5, 5)).astype(np.float32)
    rhs = rng.normal(size=(3, 5, 2)).astype(np.float32)
    compile_and_compare(client, linear_algebra, [x, rhs], lower_control_flow=lower_control_flow)


@LOWER
def test_spectrum(client, lower_control_flow):
    signal = rng.normal(size=(2, 256)).astype(np.float32)
    compile_and_compare(client, spectrum, [signal], lower_control_flow=lower_control_flow)


@LOWER
def test_ranking(client, lower_control_flow):
    logits = rng.normal(size=(6, 20)).astype(np.float32)
    labels = rng.integers(0, 20, size=6).astype(np.int32)
    compile_and_compare(client, ranking, [logits, labels], lower_control_flow=lower_control_flow)


@LOWER
def test_spectral_classifier(client, lower_control_flow):
    signal = rng.normal(size=(8, 512)).astype(np.float32)
    weights = rng.normal(size=(17, 10)).astype(np.float32) / 4
    compile_and_compare(client, spectral_classifier, [signal, weights], lower_control_flow=lower_control_flow)
