"""Linear algebra and matrix-diagonal ops against tf.raw_ops, through the service.

Decompositions that are unique only up to the sign (or phase) of each singular/eigen vector are compared as TF's
own tests do: by the absolute values of the factors and by reconstructing the input.
"""
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.raw_ops import name, op, tolerance
from tests.lower.refusals import Fed, assert_refused_as_tf, ints
from tests.oracle import assert_close, compile_and_compare, rand, specs_of, traced
from xlacs import freeze

LINALG = [np.float32, np.float64, np.complex64, np.complex128]


def well_conditioned(shape, dtype):
    """Random square matrices dominated by their diagonal, so every solve and inverse is accurate."""
    n = shape[-1]
    return (rand(shape, dtype, -1, 1) + n * np.eye(n)).astype(dtype)


def positive_definite(shape, dtype):
    a = rand(shape, dtype, -1, 1)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def run(client, fn, args):
    """(our outputs, TF's outputs) of `fn`, for checks that are not elementwise equality."""
    frozen = freeze(traced(fn), *specs_of(args))
    got = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, args)))
    want = fn(*[tf.constant(a) for a in args])
    return got, [np.asarray(w) for w in (want if isinstance(want, (list, tuple)) else [want])]


def adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_cholesky(client, dtype):
    """Only the lower triangle is read: the upper one holds noise."""
    a = positive_definite((2, 4, 4), dtype)
    a_noisy = np.tril(a) + np.triu(rand((2, 4, 4), dtype), 1)
    compile_and_compare(client, lambda a, b: [op("Cholesky")(a), op("Cholesky")(b)], [a, a_noisy],
                        **tolerance(dtype))


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_determinants(client, dtype):
    a = rand((3, 4, 4), dtype)
    compile_and_compare(client, lambda a: [op("MatrixDeterminant")(a), *op("LogMatrixDeterminant")(a)], [a],
                        **tolerance(dtype))


@pytest.mark.parametrize("adjoint_", [False, True])
@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_inverse_and_solve(client, dtype, adjoint_):
    a, b = well_conditioned((2, 4, 4), dtype), rand((2, 4, 3), dtype)
    compile_and_compare(client, lambda a, b: [op("MatrixInverse", adjoint=adjoint_)(a),
                                              op("MatrixSolve", adjoint=adjoint_)(a, b)], [a, b], **tolerance(dtype))


@pytest.mark.parametrize("lower,adjoint_", [(True, False), (False, False), (True, True), (False, True)])
@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_triangular_solve(client, dtype, lower, adjoint_):
    """The other triangle holds noise; batch dimensions broadcast."""
    a, b = well_conditioned((1, 4, 4), dtype), rand((3, 4, 2), dtype)
    compile_and_compare(client, op("MatrixTriangularSolve", lower=lower, adjoint=adjoint_), [a, b],
                        **tolerance(dtype))


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64], ids=name)
def test_solve_least_squares(client, dtype, shape):
    """The fast path (regularized or not) and, for real matrices, TF's complete orthogonal decomposition."""
    paths = [(True, 0.0), (True, 0.5)] + ([(False, 0.0)] if np.dtype(dtype).kind == "f" else [])
    a, b = rand(shape, dtype), rand(shape[:-1] + (2,), dtype)
    compile_and_compare(client, lambda a, b: [op("MatrixSolveLs", fast=fast)(a, b, tf.constant(l2, tf.float64))
                                              for fast, l2 in paths],
                        [a, b], rtol=1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-8)


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=name)
def test_qr(client, dtype, shape, full_matrices):
    """Q R rebuilds the input; Q and R match TF's up to the sign (phase) of each column of Q and row of R."""
    a = rand(shape, dtype)
    (q, r), (tf_q, tf_r) = run(client, op("Qr", full_matrices=full_matrices), [a])
    k = min(shape[-2:])
    assert q.shape == tf_q.shape and r.shape == tf_r.shape
    assert_close(q @ r, a, **tolerance(dtype))
    assert_close(np.triu(r), r)
    assert_close(adjoint(q) @ q, np.broadcast_to(np.eye(q.shape[-1], dtype=dtype), q.shape[:-2] + (q.shape[-1],) * 2),
                 **tolerance(dtype))
    # Columns of Q beyond min(m, n) are any orthonormal completion; the rest is unique up to phase.
    assert_close(np.abs(q[..., :k]), np.abs(tf_q[..., :k]), **tolerance(dtype))
    assert_close(np.abs(r), np.abs(tf_r), **tolerance(dtype))


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=name)
def test_svd(client, dtype, shape, full_matrices):
    a = rand(shape, dtype)
    (s, u, v), (tf_s, tf_u, tf_v) = run(client, op("Svd", full_matrices=full_matrices), [a])
    k = min(shape[-2:])
    assert_close(s, tf_s, **tolerance(dtype))
    assert u.shape == tf_u.shape and v.shape == tf_v.shape
    rebuilt = (u[..., :k] * s[..., None, :]) @ adjoint(v[..., :k])
    assert_close(rebuilt, a, **tolerance(dtype))
    assert_close(np.abs(u[..., :k]), np.abs(tf_u[..., :k]), **tolerance(dtype))
    assert_close(np.abs(v[..., :k]), np.abs(tf_v[..., :k]), **tolerance(dtype))


def test_svd_without_vectors(client):
    a = rand((2, 5, 3))
    (s, u, v), (tf_s, tf_u, tf_v) = run(client, op("Svd", compute_uv=False), [a])
    assert_close(s, tf_s)
    assert u.shape == tf_u.shape and v.shape == tf_v.shape


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_self_adjoint_eig(client, dtype):
    """Only the lower triangle is read; eigenvalues ascend; eigenvectors match TF's up to phase."""
    a = rand((2, 5, 5), dtype)
    a = a + adjoint(a)
    noisy = np.tril(a) + np.triu(rand((2, 5, 5), dtype), 1)
    (e, v), (tf_e, tf_v) = run(client, op("SelfAdjointEigV2"), [noisy])
    assert_close(e, tf_e, **tolerance(dtype))
    assert_close((a @ v), v * e[..., None, :], **tolerance(dtype))
    assert_close(np.abs(v), np.abs(tf_v), **tolerance(dtype))
    (e_only, no_v), (tf_e_only, tf_no_v) = run(client, op("SelfAdjointEigV2", compute_v=False), [noisy])
    assert_close(e_only, tf_e_only, **tolerance(dtype))
    assert no_v.shape == tf_no_v.shape


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_eig(client, dtype):
    """Eigenvalues as a set (solvers order them differently); A V = V diag(e) with unit-norm columns."""
    a = rand((2, 4, 4), dtype)
    out = tf.complex64 if np.dtype(dtype) in (np.float32, np.complex64) else tf.complex128
    (e, v), (tf_e, _) = run(client, op("Eig", Tout=out), [a])
    key = lambda w: np.sort_complex(np.round(w, 3))  # noqa: E731
    assert_close(np.stack([key(w) for w in e]), np.stack([key(w) for w in tf_e]), rtol=1e-3, atol=1e-3)
    assert_close(a.astype(e.dtype) @ v, v * e[..., None, :], rtol=1e-3, atol=1e-4)
    assert_close(np.linalg.norm(v, axis=-2), np.ones(e.shape, np.real(e).dtype), rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_lu(client, dtype):
    compile_and_compare(client, lambda a: [*op("Lu")(a), op("Lu", output_idx_type=tf.int64)(a)[1]],
                        [rand((2, 5, 5), dtype)], **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=name)
def test_lu_complex(client, dtype):
    """Complex pivots are chosen by LAPACK's |re| + |im| (TF's Eigen uses |z|), so rows may be permuted
    differently from TF's: check that p is a permutation and that L U rebuilds the input's rows in p's order."""
    a = rand((2, 5, 5), dtype)
    (packed, p), _ = run(client, op("Lu"), [a])
    lower = np.tril(packed, -1) + np.eye(5, dtype=dtype)
    assert_close(lower @ np.triu(packed), np.take_along_axis(a, p[..., None], axis=-2), **tolerance(dtype))
    assert (np.sort(p, axis=-1) == np.arange(5)).all()


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_tridiagonal_mat_mul(client, dtype):
    diagonals = [rand((2, 1, 5), dtype) for _ in range(3)]
    compile_and_compare(client, op("TridiagonalMatMul"), diagonals + [rand((2, 5, 3), dtype)], **tolerance(dtype))


# ---- bands and diagonals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=name)
def test_matrix_band_part(client, dtype):
    """Constant and fed band widths; a negative width keeps the whole triangle."""
    x = rand((2, 4, 5), dtype)
    fn = lambda x, lower, upper: [op("MatrixBandPart")(x, lower, upper)] + [  # noqa: E731
        op("MatrixBandPart")(x, tf.constant(lo, tf.int64), tf.constant(up, tf.int64))
        for lo, up in [(0, 0), (1, 2), (-1, 0), (0, -1), (-1, -1), (3, 1)]]
    compile_and_compare(client, fn, [x, np.array(1, np.int64), np.array(-1, np.int64)])


ALIGNS = ["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"]
BANDS = [0, 2, -1, (-1, 1), (-2, 0), (1, 3), (-3, -1)]


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5), (5, 3)], ids=str)
def test_matrix_diag_part_and_set_diag(client, shape):
    """Every alignment, over single diagonals and bands above, below and across the main diagonal."""
    def fn(x):
        outputs = []
        for k in BANDS:
            lo, hi = (k, k) if np.isscalar(k) else k
            if lo <= -shape[-2] or hi >= shape[-1]:  # TF requires the band to touch the matrix
                continue
            for align in ALIGNS:
                part = op("MatrixDiagPartV3", align=align)(x, tf.constant(k), tf.constant(-9.0))
                outputs += [part, op("MatrixSetDiagV3", align=align)(x, part * 10, tf.constant(k))]
        return outputs
    compile_and_compare(client, fn, [rand(shape)])


@pytest.mark.parametrize("k,rows,cols", [(0, -1, -1), (1, -1, -1), (-2, -1, -1), ((-1, 1), -1, -1),
                                         ((-1, 2), 4, -1), ((0, 1), -1, 5), (-1, 5, 3), ((-2, 0), 4, 3)], ids=str)
def test_matrix_diag(client, k, rows, cols):
    """Every alignment; num_rows and num_cols given or inferred (-1)."""
    lo, hi = (k, k) if np.isscalar(k) else k
    length = 3
    diagonal = rand((2, length) if lo == hi else (2, hi - lo + 1, length))
    compile_and_compare(client, lambda d: [op("MatrixDiagV3", align=align)(
        d, tf.constant(k), tf.constant(rows), tf.constant(cols), tf.constant(7.0)) for align in ALIGNS], [diagonal])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex64, np.bool_], ids=name)
def test_matrix_diag_v1_v2(client, dtype):
    """V1 works on the main diagonal; V2 aligns every diagonal to the left."""
    def fn(x, d, band):
        return [op("MatrixDiag")(d), op("MatrixDiagPart")(x), op("MatrixSetDiag")(x, d[:, :3]),
                op("MatrixDiagV2")(band, tf.constant([-1, 1]), tf.constant(-1), tf.constant(-1),
                                   tf.constant(np.zeros((), dtype))),
                op("MatrixDiagPartV2")(x, tf.constant([-1, 1]), tf.constant(np.ones((), dtype))),
                op("MatrixSetDiagV2")(x, band[:, :, :3], tf.constant([-1, 1]))]
    compile_and_compare(client, fn, [rand((2, 3, 4), dtype), rand((2, 4), dtype), rand((2, 3, 3), dtype)])


@pytest.mark.parametrize("shape", [(4,), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex128], ids=name)
def test_diag_and_diag_part(client, shape, dtype):
    compile_and_compare(client, lambda d: [op("Diag")(d), op("DiagPart")(op("Diag")(d) * 2)], [rand(shape, dtype)])


@pytest.mark.parametrize("partial_pivoting", [True, False])
@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_tridiagonal_solve(client, dtype, partial_pivoting):
    """Without diagonal dominance; with pivoting, zeros on the diagonal that only a row swap gets past.
    And a 1x1 system."""
    diagonals = rand((2, 3, 6), dtype)
    if partial_pivoting:
        diagonals[:, 1, ::2] = 0
    compile_and_compare(client, lambda d, b, d1, b1: [
        op("TridiagonalSolve", partial_pivoting=partial_pivoting)(d, b),
        op("TridiagonalSolve", partial_pivoting=partial_pivoting)(d1, b1)],
        [diagonals, rand((2, 6, 3), dtype), rand((3, 1), dtype, 1, 2), rand((1, 2), dtype)],
        **({"rtol": 1e-3, "atol": 1e-4} if np.dtype(dtype) in (np.float32, np.complex64) else tolerance(dtype)))


@pytest.mark.parametrize("lower,adjoint_", [(True, False), (False, False), (True, True), (False, True)])
@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_banded_triangular_solve(client, dtype, lower, adjoint_):
    """Three bands of 5x5 matrices; the padding entries of the band storage hold noise TF ignores."""
    bands = rand((2, 3, 5), dtype) + np.array([[4], [0], [0]] if lower else [[0], [0], [4]]).astype(dtype)
    compile_and_compare(client, op("BandedTriangularSolve", lower=lower, adjoint=adjoint_),
                        [bands, rand((2, 5, 2), dtype)], **tolerance(dtype))


@pytest.mark.parametrize("dtype", LINALG, ids=name)
def test_matrix_square_root(client, dtype):
    compile_and_compare(client, op("MatrixSquareRoot"), [positive_definite((2, 4, 4), dtype)],
                        rtol=1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=name)
def test_cholesky_grad(client, dtype):
    """The upper triangle of the incoming gradient holds noise: only the lower one counts."""
    chol = np.linalg.cholesky(positive_definite((2, 4, 4), dtype))
    compile_and_compare(client, op("CholeskyGrad"), [chol, rand((2, 4, 4), dtype)], **tolerance(dtype))


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

F32, I64 = np.float32, np.int64
Z = np.zeros

# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "cholesky_of_a_non_square_matrix": ("Cholesky", {"input": Fed((2, 3))}, dict(T=F32), {"input": "input"},
                                        "must be square", lambda: tf.raw_ops.Cholesky(input=Z((2, 3), F32))),
    "solve_rhs_of_other_rows": ("MatrixSolve", {"matrix": Fed((3, 3)), "rhs": Fed((2, 1))}, dict(T=F32),
                                {"input": "rhs"}, "rows must be the 3",
                                lambda: tf.raw_ops.MatrixSolve(matrix=np.eye(3, dtype=F32), rhs=Z((2, 1), F32))),
    "triangular_solve_batches_not_broadcasting": ("MatrixTriangularSolve", {"matrix": Fed((2, 3, 3)),
                                                                            "rhs": Fed((3, 3, 1))}, dict(T=F32),
                                                  {"input": "rhs"}, "incompatible shapes for broadcasting",
                                                  lambda: tf.raw_ops.MatrixTriangularSolve(
                                                      matrix=np.tile(np.eye(3, dtype=F32), (2, 1, 1)),
                                                      rhs=Z((3, 3, 1), F32))),
    "solve_ls_vector_regularizer": ("MatrixSolveLs", {"matrix": Fed((2, 3)), "rhs": Fed((2, 1)),
                                                      "l2_regularizer": Z(1, np.float64)}, dict(T=F32),
                                    {"input": "l2_regularizer"}, "must have rank 0",
                                    lambda: tf.raw_ops.MatrixSolveLs(matrix=Z((2, 3), F32), rhs=Z((2, 1), F32),
                                                                     l2_regularizer=Z(1, np.float64))),
    "tridiagonal_solve_two_diagonals": ("TridiagonalSolve", {"diagonals": Fed((2, 3)), "rhs": Fed((3, 1))},
                                        dict(T=F32), {"input": "diagonals"}, r"\[\.\.\., 3, M\]",
                                        lambda: tf.raw_ops.TridiagonalSolve(diagonals=Z((2, 3), F32),
                                                                            rhs=Z((3, 1), F32))),
    "cholesky_grad_of_other_shapes": ("CholeskyGrad", {"l": Fed((3, 3)), "grad": Fed((2, 3))}, dict(T=F32),
                                      {"input": "grad"}, "shape",
                                      lambda: tf.raw_ops.CholeskyGrad(l=np.eye(3, dtype=F32), grad=Z((2, 3), F32))),
    "band_part_past_the_rows": ("MatrixBandPart", {"input": Fed((3, 3)), "num_lower": np.int64(5),
                                                   "num_upper": np.int64(1)}, dict(T=F32, Tindex=I64),
                                {"input": "num_lower"}, "at most 3",
                                lambda: tf.raw_ops.MatrixBandPart(input=Z((3, 3), F32), num_lower=5, num_upper=1)),
    "diag_band_reversed": ("MatrixDiagV3", {"diagonal": Fed((3,)), "k": ints(1, 0), "num_rows": ints(-1)[0],
                                            "num_cols": ints(-1)[0], "padding_value": F32(0)}, dict(T=F32),
                           {"input": "k"}, "must not exceed the upper",
                           lambda: tf.raw_ops.MatrixDiagV3(diagonal=Z(3, F32), k=[1, 0], num_rows=-1, num_cols=-1,
                                                           padding_value=0.0)),
    "diag_part_out_of_the_matrix": ("MatrixDiagPartV3", {"input": Fed((3, 3)), "k": ints(5)[0],
                                                         "padding_value": F32(0)}, dict(T=F32),
                                    {"input": "k"}, r"in \[-2, 2\]",
                                    lambda: tf.raw_ops.MatrixDiagPartV3(input=Z((3, 3), F32), k=5, padding_value=0.0)),
    "set_diag_of_another_length": ("MatrixSetDiagV3", {"input": Fed((3, 3)), "diagonal": Fed((2,)), "k": ints(0)[0]},
                                   dict(T=F32), {"input": "diagonal"}, r"need \[3\]",
                                   lambda: tf.raw_ops.MatrixSetDiagV3(input=Z((3, 3), F32), diagonal=Z(2, F32), k=0)),
    "diag_part_not_square": ("DiagPart", {"input": Fed((2, 3))}, dict(T=F32), {"input": "input"}, r"form s \+ s",
                             lambda: tf.raw_ops.DiagPart(input=Z((2, 3), F32))),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])
