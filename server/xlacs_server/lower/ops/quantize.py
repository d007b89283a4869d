"""Simulated quantization: FakeQuant* (with their gradients) and QuantizeAndDequantize*, with TF's rounding."""
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_scalar
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.numerics import divide, multiply, rounded, wide
from xlacs_server.lower.registry import register_op

F32 = np.float32


def nudge(min, max, num_bits: int, narrow_range: bool):
    """(nudged_min, nudged_max, scale, inverse_scale): the range moves so that real zero is a step."""
    quant_min, quant_max = F32(1 if narrow_range else 0), F32((1 << num_bits) - 1)
    min, max = jnp.asarray(min, F32), jnp.asarray(max, F32)
    scale = divide(max - min, quant_max - quant_min)
    inverse_scale = divide(quant_max - quant_min, max - min)  # TF's, rather than 1 / scale
    zero_point_from_min = quant_min - divide(min, scale)
    zero_point = jnp.clip(lax.round(zero_point_from_min, lax.RoundingMethod.AWAY_FROM_ZERO), quant_min, quant_max)
    return (quant_min - zero_point) * scale, (quant_max - zero_point) * scale, scale, inverse_scale


def no_range(min, max):
    """TF's kernels give zeros (and pass gradients through) when min and max are both zero."""
    return (jnp.asarray(min) == 0) & (jnp.asarray(max) == 0)


def fake_quant(inputs, min, max, num_bits, narrow_range, by_division):
    """TF's Vars kernel divides by the scale; its Args and PerChannel kernels multiply by the inverse."""
    nudged_min, nudged_max, scale, inverse_scale = nudge(min, max, num_bits, narrow_range)
    quant_zero = jnp.floor(rounded(wide(multiply(-nudged_min, inverse_scale)) + 0.5, F32))
    shifted = jnp.clip(inputs, nudged_min, nudged_max) - nudged_min
    steps = divide(shifted, scale) if by_division else multiply(shifted, inverse_scale)
    level = jnp.floor(rounded(rounded(wide(steps) - quant_zero, F32) + 0.5, F32))  # TF's float32 steps
    return jnp.where(no_range(min, max), F32(0), level.astype(F32) * scale)


def fake_quant_grads(gradients, inputs, min, max, num_bits, narrow_range, reduce_axes):
    """(backprop wrt inputs, wrt min, wrt max): inside the nudged range the op is the identity."""
    nudged_min, nudged_max, _, _ = nudge(min, max, num_bits, narrow_range)
    zero = jnp.zeros((), gradients.dtype)
    unranged = no_range(min, max)
    inside = jnp.where(((inputs >= nudged_min) & (inputs <= nudged_max)) | unranged, gradients, zero)
    below = jnp.sum(jnp.where((inputs < nudged_min) & ~unranged, gradients, zero), axis=reduce_axes)
    above = jnp.sum(jnp.where((inputs > nudged_max) & ~unranged, gradients, zero), axis=reduce_axes)
    return [inside, below, above]


def all_but_last(x) -> tuple[int, ...]:
    return tuple(range(x.ndim - 1))


def check_fake_quant(num_bits: int, gradients=None, inputs=None) -> None:
    """What every FakeQuant kernel checks: num_bits in [2, 16], gradients of the inputs' shape."""
    if not 2 <= num_bits <= 16:
        raise InvalidArgument(f"num_bits={num_bits} must be in [2, 16]", attr="num_bits")
    if gradients is not None and np.shape(gradients) != np.shape(inputs):
        raise InvalidArgument(f"input 'gradients' has shape {list(np.shape(gradients))}; it must have the shape "
                              f"{list(np.shape(inputs))} of input 'inputs'", input="gradients")


def check_range(inputs, min, max, per_channel: bool) -> None:
    """The min and max inputs: scalars, or one per channel (the last dimension of `inputs`)."""
    for name, value in (("min", min), ("max", max)):
        if not per_channel:
            check_scalar(value, name)
        elif np.shape(value) != np.shape(inputs)[-1:]:
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(value))}; it must hold one value per "
                                  f"channel of input 'inputs' {list(np.shape(inputs))}", input=name)


@register_op("FakeQuantWithMinMaxArgs")
def fake_quant_args(ctx, inputs, *, min, max, num_bits, narrow_range):
    check_fake_quant(num_bits)
    if min >= max:
        raise InvalidArgument(f"min={min} must be smaller than max={max}", attr="min")
    return [fake_quant(inputs, min, max, num_bits, narrow_range, by_division=False)]


@register_op("FakeQuantWithMinMaxArgsGradient")
def fake_quant_args_gradient(ctx, gradients, inputs, *, min, max, num_bits, narrow_range):
    check_fake_quant(num_bits, gradients, inputs)
    if min >= max:
        raise InvalidArgument(f"min={min} must be smaller than max={max}", attr="min")
    return fake_quant_grads(gradients, inputs, min, max, num_bits, narrow_range, ())[:1]


@register_op("FakeQuantWithMinMaxVars")
def fake_quant_vars(ctx, inputs, min, max, *, num_bits, narrow_range):
    check_fake_quant(num_bits)
    check_range(inputs, min, max, per_channel=False)
    return [fake_quant(inputs, min, max, num_bits, narrow_range, by_division=True)]


@register_op("FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_vars_per_channel(ctx, inputs, min, max, *, num_bits, narrow_range):
    check_fake_quant(num_bits)
    check_range(inputs, min, max, per_channel=True)
    return [fake_quant(inputs, min, max, num_bits, narrow_range, by_division=False)]


@register_op("FakeQuantWithMinMaxVarsGradient")
def fake_quant_vars_gradient(ctx, gradients, inputs, min, max, *, num_bits, narrow_range):
    check_fake_quant(num_bits, gradients, inputs)
    check_range(inputs, min, max, per_channel=False)
    return fake_quant_grads(gradients, inputs, min, max, num_bits, narrow_range, None)


@register_op("FakeQuantWithMinMaxVarsPerChannelGradient")
def fake_quant_vars_per_channel_gradient(ctx, gradients, inputs, min, max, *, num_bits, narrow_range):
    check_fake_quant(num_bits, gradients, inputs)
    check_range(inputs, min, max, per_channel=True)
    return fake_quant_grads(gradients, inputs, min, max, num_bits, narrow_range, all_but_last(inputs))


ROUNDING = {"HALF_TO_EVEN": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
            "HALF_UP": lambda x: jnp.floor(x + jnp.asarray(0.5, x.dtype))}  # x rounded: see multiply


def along(vector, axis: int | None, ndim: int):
    """A per-channel vector shaped to broadcast along `axis`; scalars (one range for all) pass unchanged."""
    if axis is None or jnp.ndim(vector) == 0:
        return vector
    return jnp.reshape(vector, (1,) * axis + (-1,) + (1,) * (ndim - axis - 1))


def quantization_axis(input, axis: int) -> int | None:
    """The axis attr of QuantizeAndDequantize: -1 (one range for all) or a dimension of `input`."""
    if not -1 <= axis < np.ndim(input):
        raise InvalidArgument(f"axis={axis} must be -1 or in [0, {np.ndim(input)}), a dimension of input 'input'",
                              attr="axis")
    return None if axis == -1 else axis


def check_quantization_range(input, input_min, input_max, axis: int | None) -> None:
    """input_min and input_max: scalars, or with an axis one value per index along it."""
    for name, value in (("input_min", input_min), ("input_max", input_max)):
        if axis is None:
            if np.size(value) != 1 or np.ndim(value) > 1:
                raise InvalidArgument(f"input {name!r} has shape {list(np.shape(value))}; with axis=-1 it must be a "
                                      "scalar", input=name)
        elif np.shape(value) != (input.shape[axis],):
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(value))}; it must hold one value per "
                                  f"index of dimension {axis} of input 'input' {list(input.shape)}", input=name)
    if is_constant(input_min) and is_constant(input_max) and np.any(input_min > input_max):
        raise InvalidArgument(f"inputs 'input_min' {np.asarray(input_min).tolist()} and 'input_max' "
                              f"{np.asarray(input_max).tolist()} are an empty range", input="input_min")


def quantize_and_dequantize(input, input_min, input_max, *, signed_input, num_bits, range_given, round_mode,
                            narrow_range, axis):
    if round_mode not in ROUNDING:
        raise InvalidArgument(f"round_mode {round_mode!r} is not one of {sorted(ROUNDING)}", attr="round_mode")
    if not 0 < num_bits < (62 if signed_input else 63):  # TF's bounds: the quantized range must fit in int64
        raise InvalidArgument(f"num_bits={num_bits} must be in [1, {61 if signed_input else 62}] with signed_input="
                              f"{signed_input}", attr="num_bits")
    axis = quantization_axis(input, axis)
    if range_given:
        check_quantization_range(input, input_min, input_max, axis)
    if range_given:  # TF's V2 and V4 take a scalar range even per channel
        min_range, max_range = along(input_min, axis, input.ndim), along(input_max, axis, input.ndim)
    else:
        reduce_axes = None if axis is None else tuple(a for a in range(input.ndim) if a != axis)
        min_range = jnp.min(input, axis=reduce_axes, keepdims=True)
        max_range = jnp.max(input, axis=reduce_axes, keepdims=True)
    dtype = input.dtype
    if signed_input:
        min_q, max_q = -(1 << (num_bits - 1)) + narrow_range, (1 << (num_bits - 1)) - 1
    else:
        min_q, max_q = 0, (1 << num_bits) - 1
    min_q, max_q = jnp.asarray(min_q, dtype), jnp.asarray(max_q, dtype)
    # The side of the range that allows the smaller scale sets it; the other side is recomputed from it.
    biggest = jnp.asarray(jnp.finfo(dtype).max, dtype)
    from_min = jnp.where(min_q * min_range > 0, divide(min_q, min_range), biggest)
    from_max = jnp.where(max_q * max_range > 0, divide(max_q, max_range), biggest)
    use_min = from_min < from_max
    scale = jnp.where(use_min, from_min, from_max)
    inverse_scale = jnp.where(use_min, divide(min_range, min_q), divide(max_range, max_q))
    if range_given:  # clamping to the adjusted range only keeps the quantized values in their type's range
        input = jnp.clip(input, jnp.where(use_min, min_range, min_q * inverse_scale),
                         jnp.where(use_min, max_q * inverse_scale, max_range))
    return ROUNDING[round_mode](multiply(input, scale)) * inverse_scale


@register_op("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4", dtypes=D.FLOAT)
def quantize_and_dequantize_v2(ctx, input, input_min, input_max, *, T, signed_input, num_bits, range_given, round_mode,
                               narrow_range, axis):
    return [quantize_and_dequantize(input, input_min, input_max, signed_input=signed_input, num_bits=num_bits,
                                    range_given=range_given, round_mode=round_mode, narrow_range=narrow_range,
                                    axis=axis)]


@register_op("QuantizeAndDequantizeV3", dtypes=D.FLOAT, constant_inputs=("num_bits",))
def quantize_and_dequantize_v3(ctx, input, input_min, input_max, num_bits, *, T, signed_input, range_given,
                               narrow_range, axis):
    check_scalar(num_bits, "num_bits")
    return [quantize_and_dequantize(input, input_min, input_max, signed_input=signed_input,
                                    num_bits=int(num_bits), range_given=range_given,
                                    round_mode="HALF_TO_EVEN", narrow_range=narrow_range, axis=axis)]


@register_op("QuantizeAndDequantizeV4Grad", dtypes=D.FLOAT)
def quantize_and_dequantize_v4_grad(ctx, gradients, input, input_min, input_max, *, T, axis):
    if np.shape(gradients) != np.shape(input):
        raise InvalidArgument(f"input 'gradients' has shape {list(np.shape(gradients))}; it must have the shape "
                              f"{list(np.shape(input))} of input 'input'", input="gradients")
    axis = quantization_axis(input, axis)
    check_quantization_range(input, input_min, input_max, axis)
    low, high = along(input_min, axis, input.ndim), along(input_max, axis, input.ndim)
    inside = jnp.where((input >= low) & (input <= high), gradients, jnp.zeros((), gradients.dtype))
    return [inside, jnp.zeros_like(input_min), jnp.zeros_like(input_max)]
