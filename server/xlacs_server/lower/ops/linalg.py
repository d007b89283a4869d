"""Linear algebra over batches of matrices: factorizations, eigen- and singular values, determinants, solves."""
import jax.numpy as jnp
import jax.scipy.linalg
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, Unimplemented, broadcast_shape, check_rank, check_scalar
from xlacs_server.lower.ops.math import adjoint
from xlacs_server.lower.ops.matrix_diag import matrix_from_diagonals
from xlacs_server.lower.registry import register_op

# TF's linear-algebra kernels: float32/64 and complex; a few OpDefs also list float16.
LINALG = (np.float32, np.float64) + D.COMPLEX
LINALG_HALF = LINALG + (np.float16,)
HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _widening_half(fn):
    """`fn` computed in float32 for float16 and bfloat16 inputs, which jax's linear algebra does not take."""
    def wrapped(x, *args):
        if x.dtype not in HALF:
            return fn(x, *args)
        outputs = fn(x.astype(np.float32), *(a.astype(np.float32) if a.dtype == x.dtype else a for a in args))
        return [out.astype(x.dtype) if out.dtype == np.float32 else out for out in outputs]
    return wrapped


def matrices(x, input: str = "input", *, square: bool = False):
    """`x` as TF's linear-algebra kernels take it: a batch of matrices [..., M, N], square if `square`."""
    check_rank(x, input, min_rank=2)
    if square and x.shape[-1] != x.shape[-2]:
        raise InvalidArgument(f"input {input!r} has shape {list(x.shape)}; its matrices must be square",
                              input=input)
    return x


def check_rhs(matrix, rhs, *, broadcast: bool = False) -> None:
    """rhs [..., M, K] for matrix [..., M, M]: the same rows, and the same batch (or, if `broadcast`, batches
    that broadcast)."""
    check_rank(rhs, "rhs", min_rank=2)
    if rhs.shape[-2] != matrix.shape[-2]:
        raise InvalidArgument(f"input 'rhs' has shape {list(rhs.shape)}; its rows must be the "
                              f"{matrix.shape[-2]} of input 'matrix' {list(matrix.shape)}", input="rhs")
    if broadcast:
        broadcast_shape(matrix.shape[:-2], rhs.shape[:-2], inputs=("matrix", "rhs"))
    elif rhs.shape[:-2] != matrix.shape[:-2]:
        raise InvalidArgument(f"inputs 'matrix' {list(matrix.shape)} and 'rhs' {list(rhs.shape)} must have the "
                              "same batch dimensions", input="rhs")


def _no_output(dtype):
    # TF leaves an output that a flag turned off (Svd's u and v without compute_uv) as an empty scalar slot.
    return jnp.zeros((), dtype)


@register_op("Cholesky", dtypes=LINALG_HALF)
def cholesky(ctx, input, *, T):
    # Only the lower triangle is read, as in TF; a matrix that is not positive definite gives NaNs, not an error.
    return _widening_half(lambda x: [lax.linalg.cholesky(x, symmetrize_input=False)])(matrices(input, square=True))


@register_op("Qr", dtypes=LINALG_HALF)
def qr(ctx, input, *, T, full_matrices):
    return _widening_half(lambda x: list(jnp.linalg.qr(x, mode="complete" if full_matrices else "reduced")))(
        matrices(input))


@register_op("MatrixDeterminant", dtypes=LINALG_HALF)
def matrix_determinant(ctx, input, *, T):
    return _widening_half(lambda x: [jnp.linalg.det(x)])(matrices(input, square=True))


@register_op("LogMatrixDeterminant", dtypes=LINALG_HALF)
def log_matrix_determinant(ctx, input, *, T):
    def slogdet(x):
        sign, log_abs = jnp.linalg.slogdet(x)
        return [sign.astype(x.dtype), log_abs.astype(x.dtype)]  # both outputs are T, complex ones included
    return _widening_half(slogdet)(matrices(input, square=True))


@register_op("MatrixInverse", dtypes=LINALG_HALF)
def matrix_inverse(ctx, input, *, T, adjoint):
    return _widening_half(lambda x: [jnp.linalg.inv(_adjoint_if(x, adjoint))])(matrices(input, square=True))


def _adjoint_if(x, flag: bool):
    return adjoint(x) if flag else x


@register_op("MatrixSolve", dtypes=LINALG_HALF)
def matrix_solve(ctx, matrix, rhs, *, T, adjoint):
    check_rhs(matrices(matrix, "matrix", square=True), rhs)
    return _widening_half(lambda a, b: [jnp.linalg.solve(_adjoint_if(a, adjoint), b)])(matrix, rhs)


@register_op("MatrixTriangularSolve", dtypes=LINALG_HALF + (ml_dtypes.bfloat16,))
def matrix_triangular_solve(ctx, matrix, rhs, *, T, lower, adjoint):
    # Batch dimensions broadcast (TF >= 2.2); only the `lower` (or upper) triangle of the matrix is read.
    check_rhs(matrices(matrix, "matrix", square=True), rhs, broadcast=True)
    batch = np.broadcast_shapes(matrix.shape[:-2], rhs.shape[:-2])
    matrix = jnp.broadcast_to(matrix, batch + matrix.shape[-2:])
    rhs = jnp.broadcast_to(rhs, batch + rhs.shape[-2:])
    return _widening_half(lambda a, b: [lax.linalg.triangular_solve(
        a, b, left_side=True, lower=lower, transpose_a=adjoint, conjugate_a=adjoint)])(matrix, rhs)


@register_op("BandedTriangularSolve", dtypes=LINALG_HALF)
def banded_triangular_solve(ctx, matrix, rhs, *, T, lower, adjoint):
    """`matrix` holds the K bands of each triangular matrix, [..., K, M]: from the diagonal down (lower) or from
    the (K - 1)-th superdiagonal down to the diagonal (upper), superdiagonals padded on the right and
    subdiagonals on the left."""
    matrices(matrix, "matrix")
    bands, size = matrix.shape[-2], matrix.shape[-1]
    if bands > size:
        raise InvalidArgument(f"input 'matrix' has shape {list(matrix.shape)}: it holds {bands} bands of matrices "
                              f"of size {size}, at most {size}", input="matrix")
    k = np.array([1 - bands, 0] if lower else [0, bands - 1])
    dense = matrix_from_diagonals(matrix, k, size, size, 0, "LEFT_RIGHT")[0]
    return matrix_triangular_solve(ctx, dense, rhs, T=T, lower=lower, adjoint=adjoint)


@register_op("MatrixSolveLs", dtypes=LINALG_HALF)
def matrix_solve_ls(ctx, matrix, rhs, l2_regularizer, *, T, fast):
    check_rhs(matrices(matrix, "matrix"), rhs)
    check_scalar(l2_regularizer, "l2_regularizer")
    def solve(a, b, l2):
        if not fast:  # TF's complete orthogonal decomposition: the minimum-norm least-squares solution
            return [jnp.vectorize(lambda a, b: jnp.linalg.lstsq(a, b)[0], signature="(m,n),(m,k)->(n,k)")(a, b)]
        # TF's fast path: the regularized normal equations, on the smaller Gram matrix.
        m, n = a.shape[-2:]
        if m >= n:
            gram = adjoint(a) @ a + l2.astype(a.dtype) * jnp.eye(n, dtype=a.dtype)
            return [jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(gram), True), adjoint(a) @ b)]
        gram = a @ adjoint(a) + l2.astype(a.dtype) * jnp.eye(m, dtype=a.dtype)
        return [adjoint(a) @ jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(gram), True), b)]
    return _widening_half(solve)(matrix, rhs, l2_regularizer)


@register_op("Svd", dtypes=LINALG_HALF)
def svd(ctx, input, *, T, compute_uv, full_matrices):
    def decompose(x):
        if not compute_uv:
            return [jnp.linalg.svd(x, compute_uv=False).astype(x.dtype), _no_output(x.dtype), _no_output(x.dtype)]
        u, s, vh = jnp.linalg.svd(x, full_matrices=full_matrices)
        return [s.astype(x.dtype), u, adjoint(vh)]  # TF returns V, not its adjoint
    return _widening_half(decompose)(matrices(input))


@register_op("SelfAdjointEigV2", dtypes=LINALG_HALF)
def self_adjoint_eig_v2(ctx, input, *, T, compute_v):
    def decompose(x):
        # The lower triangle is read, as TF's Eigen solver does; eigenvalues come in ascending order.
        v, w = lax.linalg.eigh(x, lower=True, symmetrize_input=False)
        return [w.astype(x.dtype), v if compute_v else _no_output(x.dtype)]
    return _widening_half(decompose)(matrices(input, square=True))


@register_op("Eig", dtypes=LINALG, devices=("cpu",))  # XLA has a non-symmetric eigensolver on CPU only
def eig(ctx, input, *, T, Tout, compute_v):
    w, v = jnp.linalg.eig(matrices(input, square=True))
    return [w.astype(Tout), v.astype(Tout) if compute_v else _no_output(Tout)]


@register_op("MatrixSquareRoot", dtypes=LINALG_HALF, devices=("cpu",))  # XLA's Schur decomposition: CPU only
def matrix_square_root(ctx, input, *, T):
    def sqrtm(x):
        # sqrtm is complex: a real input takes the real part, which TF's real Schur method computes.
        root = jnp.vectorize(jax.scipy.linalg.sqrtm, signature="(n,n)->(n,n)")(x)
        return [root if jnp.iscomplexobj(x) else jnp.real(root).astype(x.dtype)]
    return _widening_half(sqrtm)(matrices(input, square=True))


@register_op("CholeskyGrad", dtypes=(np.float16, np.float32, np.float64))
def cholesky_grad(ctx, l, grad, *, T):
    """dA from L = cholesky(A) and dL (only its lower triangle is read), symmetrized, as TF's kernel."""
    def backprop(l, grad):
        eye = jnp.eye(l.shape[-1], dtype=l.dtype)
        l_inverse = lax.linalg.triangular_solve(l, jnp.broadcast_to(eye, l.shape), left_side=True, lower=True)
        middle = adjoint(l) @ jnp.tril(grad)
        middle = jnp.tril(middle, -1) + 0.5 * middle * eye  # the lower triangle, with half its diagonal
        grad_a = adjoint(l_inverse) @ middle @ l_inverse
        return [(grad_a + adjoint(grad_a)) * 0.5]
    if np.shape(grad) != np.shape(matrices(l, "l", square=True)):
        raise InvalidArgument(f"input 'grad' has shape {list(np.shape(grad))}; it must have the shape "
                              f"{list(l.shape)} of input 'l'", input="grad")
    return _widening_half(backprop)(l, grad)


@register_op("Lu", dtypes=LINALG_HALF)
def lu(ctx, input, *, T, output_idx_type):
    def factor(x):
        packed, _, permutation = lax.linalg.lu(x)  # input[permutation] == L @ U, as TF's p
        return [packed, permutation.astype(output_idx_type)]
    return _widening_half(factor)(matrices(input, square=True))


@register_op("TridiagonalMatMul", dtypes=LINALG)
def tridiagonal_mat_mul(ctx, superdiag, maindiag, subdiag, rhs, *, T):
    """superdiag[..., i] multiplies rhs row i + 1, subdiag[..., i] row i - 1 (the unused ends are ignored)."""
    matrices(rhs, "rhs")
    want = rhs.shape[:-2] + (1, rhs.shape[-2])
    for name, d in (("superdiag", superdiag), ("maindiag", maindiag), ("subdiag", subdiag)):
        if np.shape(d) != want:
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(d))}; for input 'rhs' "
                                  f"{list(rhs.shape)} it must be {list(want)}", input=name)

    def rows(d):
        return jnp.swapaxes(d, -1, -2)  # [..., 1, M] -> [..., M, 1], one factor per row of rhs
    zero = jnp.zeros_like(rhs[..., :1, :])
    below = jnp.concatenate([rhs[..., 1:, :], zero], axis=-2)
    above = jnp.concatenate([zero, rhs[..., :-1, :]], axis=-2)
    return [rows(maindiag) * rhs + rows(superdiag) * below + rows(subdiag) * above]


def _eliminate(row, coefficients, pivoting: bool):
    """One step of Gaussian elimination on a tridiagonal system, as LAPACK's gtsv and TF's kernel do it.

    `row` is row i as eliminated so far (its diagonal, superdiagonal and right-hand side); `coefficients` are
    row i + 1's (diagonal, subdiagonal, superdiagonal, right-hand side). Returns the next row and row i of U
    (diagonal, first and second superdiagonals) with its right-hand side. With pivoting, rows i and i + 1
    swap when the subdiagonal entry is the larger: U then gains a second superdiagonal.
    """
    a0, a1, x = row
    d, s, sup, r = coefficients
    keep = jnp.abs(a0) >= jnp.abs(s)
    f_keep = s / a0
    f_swap = a0 / s

    def pick(kept, swapped):
        if not pivoting:
            return kept
        return jnp.where(jnp.reshape(keep, keep.shape + (1,) * (kept.ndim - keep.ndim)), kept, swapped)
    next_row = (pick(d - f_keep * a1, a1 - f_swap * d), pick(sup, -f_swap * sup),
                pick(r - f_keep[..., None] * x, x - f_swap[..., None] * r))
    done = (pick(a0, s), pick(a1, d), pick(jnp.zeros_like(sup), sup), pick(x, r))
    return next_row, done


@register_op("TridiagonalSolve", dtypes=LINALG)
def tridiagonal_solve(ctx, diagonals, rhs, *, T, partial_pivoting, perturb_singular):
    """diagonals[..., 0, :] is the superdiagonal, [..., 1, :] the diagonal, [..., 2, :] the subdiagonal (their
    unused ends are ignored); rhs is [..., M, K]. A singular system gives inf or NaN where TF raises."""
    if perturb_singular:
        raise Unimplemented("perturb_singular=True is not supported", attr="perturb_singular")
    matrices(diagonals, "diagonals")
    matrices(rhs, "rhs")
    if diagonals.shape[-2] != 3:
        raise InvalidArgument(f"input 'diagonals' has shape {list(diagonals.shape)}; it must be [..., 3, M]: the "
                              "superdiagonal, the diagonal and the subdiagonal", input="diagonals")
    if diagonals.shape[:-2] != rhs.shape[:-2] or diagonals.shape[-1] != rhs.shape[-2]:
        raise InvalidArgument(f"input 'rhs' has shape {list(rhs.shape)}; for input 'diagonals' "
                              f"{list(diagonals.shape)} it must be {list(diagonals.shape[:-2])} + "
                              f"[{diagonals.shape[-1]}, K]", input="rhs")
    rows = jnp.moveaxis(diagonals, -1, 0)  # [M, ..., 3]: scan over the rows
    upper, main, lower = rows[..., 0], rows[..., 1], rows[..., 2]
    upper = upper.at[-1].set(0)
    b = jnp.moveaxis(rhs, -2, 0)
    last, done = lax.scan(lambda row, c: _eliminate(row, c, partial_pivoting), (main[0], upper[0], b[0]),
                          (main[1:], lower[1:], upper[1:], b[1:]))
    u0 = jnp.concatenate([done[0], last[0][None]])
    u1 = jnp.concatenate([done[1], jnp.zeros_like(last[1])[None]])
    u2 = jnp.concatenate([done[2], jnp.zeros_like(last[1])[None]])
    y = jnp.concatenate([done[3], last[2][None]])

    def substitute(after, row):  # back substitution with U's two superdiagonals
        (x1, x2), (d, s1, s2, yi) = after, row
        xi = (yi - s1[..., None] * x1 - s2[..., None] * x2) / d[..., None]
        return (xi, x1), xi
    zero = jnp.zeros_like(y[0])
    _, x = lax.scan(substitute, (zero, zero), (u0, u1, u2, y), reverse=True)
    return [jnp.moveaxis(x, 0, -2)]
