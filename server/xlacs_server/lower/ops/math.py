"""Products of tensors: MatMul, the BatchMatMul family, SparseMatMul, Einsum and Cross."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import (InvalidArgument, Unimplemented, broadcast_shape, check_dtype, check_dtypes,
                                       check_rank)
from xlacs_server.lower.registry import register_op

HIGHEST = lax.Precision.HIGHEST
INT32_64 = (np.int32, np.int64)
MATMUL_TYPES = D.FLOAT + INT32_64 + D.UNSIGNED + D.COMPLEX
BATCH_MATMUL_TYPES = D.FLOAT + INT32_64 + D.COMPLEX
BATCH_MATMUL_V2_TYPES = MATMUL_TYPES + (np.int16,)
BATCH_MATMUL_V3_OUT_TYPES = D.FLOAT + (np.int16,) + INT32_64 + D.COMPLEX


def adjoint(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def check_product(x, y, inputs: tuple[str, str], *, batched: bool) -> None:
    """As TF's MatMul kernels: matrices (or batches of them, broadcast) whose inner dimensions agree; the
    shapes are those after any transpose or adjoint."""
    for operand, name in zip((x, y), inputs):
        check_rank(operand, name, **({"min_rank": 2} if batched else {"rank": 2}))
    if x.shape[-1] != y.shape[-2]:
        raise InvalidArgument(f"matrix size-incompatible: input {inputs[0]!r} {list(x.shape)} times input "
                              f"{inputs[1]!r} {list(y.shape)} (after any transpose): the inner dimensions "
                              f"{x.shape[-1]} and {y.shape[-2]} must be equal", input=inputs[1])
    broadcast_shape(x.shape[:-2], y.shape[:-2], inputs=inputs)


@register_op("MatMul", dtypes=MATMUL_TYPES)
def mat_mul(ctx, a, b, *, T, transpose_a, transpose_b, grad_a, grad_b):
    check_dtypes(ctx.node.op, (a, b), T)
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    check_product(a, b, ("a", "b"), batched=False)
    return [jnp.matmul(a, b, precision=HIGHEST)]


def _batch_mat_mul(x, y, adj_x, adj_y, out_dtype):
    x = adjoint(x) if adj_x else x
    y = adjoint(y) if adj_y else y
    check_product(x, y, ("x", "y"), batched=True)
    return jnp.matmul(x.astype(out_dtype), y.astype(out_dtype), precision=HIGHEST)


def batch_mat_mul(ctx, x, y, *, T, adj_x, adj_y, grad_x, grad_y):
    check_dtypes(ctx.node.op, (x, y), T)
    return [_batch_mat_mul(x, y, adj_x, adj_y, T)]


register_op("BatchMatMul", dtypes=BATCH_MATMUL_TYPES)(batch_mat_mul)
register_op("BatchMatMulV2", dtypes=BATCH_MATMUL_V2_TYPES)(batch_mat_mul)


@register_op("BatchMatMulV3", dtypes=BATCH_MATMUL_V3_OUT_TYPES, type_attr="Tout")
def batch_mat_mul_v3(ctx, x, y, *, Ta, Tb, Tout, adj_x, adj_y, grad_x, grad_y):
    check_dtype(x, "x", Ta, "Ta")
    check_dtype(y, "y", Tb, "Tb")
    return [_batch_mat_mul(x, y, adj_x, adj_y, Tout)]  # TF widens the operands (e.g. int8) to Tout first


@register_op("SparseMatMul", dtypes=(np.float32, ml_dtypes.bfloat16), type_attr="Ta")
def sparse_mat_mul(ctx, a, b, *, Ta, Tb, transpose_a, transpose_b, a_is_sparse, b_is_sparse):
    # The sparsity flags are hints for TF's CPU kernel; the product is dense and always float32.
    check_dtype(a, "a", Ta, "Ta")
    check_dtype(b, "b", Tb, "Tb")
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    check_product(a, b, ("a", "b"), batched=False)
    return [jnp.matmul(a.astype(np.float32), b.astype(np.float32), precision=HIGHEST)]


@register_op("Einsum", dtypes=D.NUMERIC)
def einsum(ctx, *inputs, equation, N, T):
    for i, x in enumerate(inputs):
        check_dtype(x, f"inputs:{i}", T)
    check_einsum(equation, inputs)
    return [jnp.einsum(equation, *inputs, precision=HIGHEST)]


def check_einsum(equation: str, inputs) -> None:
    """As TF's Einsum kernel: one term per input, one label per dimension (an ellipsis stands for the rest),
    and each label of one size wherever it appears."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if not arrow or "->" in rhs or len(terms) != len(inputs):
        raise InvalidArgument(f"equation {equation!r} must be 'terms->output' with one term per input "
                              f"({len(inputs)})", attr="equation")
    sizes, batches = {}, []
    for i, (term, x) in enumerate(zip(terms, inputs)):
        before, ellipsis, after = term.partition("...")
        shape, labels = np.shape(x), before + after
        if not all(c.isalpha() for c in labels) or (len(labels) > len(shape) if ellipsis else
                                                    len(labels) != len(shape)):
            raise InvalidArgument(f"term {term!r} of equation {equation!r} does not fit input 'inputs:{i}' of shape "
                                  f"{list(shape)}: give one letter per dimension", input=f"inputs:{i}")
        batches.append(shape[len(before):len(shape) - len(after)])
        for label, size in [*zip(before, shape), *zip(after, shape[len(shape) - len(after):])]:
            if sizes.setdefault(label, size) != size:
                raise InvalidArgument(f"label {label!r} of equation {equation!r} has size {size} in input "
                                      f"'inputs:{i}' of shape {list(shape)}, but {sizes[label]} before it",
                                      input=f"inputs:{i}")
    batch = broadcast_shape(*batches, inputs=tuple(f"inputs:{i}" for i in range(len(inputs))))  # the ellipses'
    if batch and "..." not in rhs:
        raise InvalidArgument(f"the ellipses of equation {equation!r} stand for {len(batch)} dimension(s), but its "
                              "output has no ellipsis", attr="equation")
    labels = rhs.replace("...", "")
    if set(labels) - sizes.keys() or len(set(labels)) != len(labels):
        raise Unimplemented(f"the output {rhs!r} of equation {equation!r} repeats a label or has one no input "
                            "has", attr="equation")


@register_op("Cross", dtypes=D.REAL)
def cross(ctx, a, b, *, T):
    check_dtypes(ctx.node.op, (a, b), T)
    if np.shape(a) != np.shape(b) or np.ndim(a) < 1 or np.shape(a)[-1] != 3:
        raise InvalidArgument(f"inputs 'a' {list(np.shape(a))} and 'b' {list(np.shape(b))} must have one shape whose "
                              "last dimension is 3", input="b")
    return [jnp.cross(a, b)]
