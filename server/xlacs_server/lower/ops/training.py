"""Optimizer updates, TF's ResourceApply* ops, on the VariableRef values the engine binds for each variable input:
each rule reads the variable and its slots, computes TF's CPU kernel's formulas (core/kernels/training_ops.cc), and
assigns every updated slot back. `use_locking` has nothing to guard: a program's updates happen in graph order."""
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.graph.op_defs import op_def
from xlacs_server.lower.checks import InvalidArgument, check_dtype, check_scalar
from xlacs_server.lower.dtypes import FLOAT
from xlacs_server.lower.registry import register_op
from xlacs_server.lower.variables import VariableRef

GRADIENTS = ("grad", "delta")  # the inputs of the variable's shape; the other T inputs are scalars


def operands(ctx, T, *inputs) -> list:
    """The node's inputs in OpDef order, checked as TF's kernels check them, resources as their values: every
    resource holds a T tensor of the shape of the first (the variable), the gradient is of that shape too, and
    the hyperparameters are scalars."""
    values = []
    for arg, x in zip(op_def(ctx.node.op).input_arg, inputs):
        if arg.type == tf.DT_RESOURCE:
            if not isinstance(x, VariableRef):
                raise InvalidArgument(f"input {arg.name!r} must be a resource variable", input=arg.name)
            check_dtype(x.value, arg.name, T)
            x = x.value
        elif arg.type_attr == "T":
            check_dtype(x, arg.name, T)
        if arg.type == tf.DT_RESOURCE or arg.name in GRADIENTS:
            if values and np.shape(x) != np.shape(values[0]):
                raise InvalidArgument(f"input {arg.name!r} has shape {list(np.shape(x))}, but variable 'var' has "
                                      f"{list(np.shape(values[0]))}: they must be the same", input=arg.name)
        else:
            check_scalar(x, arg.name)
        values.append(x)
    return values


def assign(*pairs) -> list:
    """Assigns each (resource, value) pair; a ResourceApply* op has no outputs."""
    for resource, value in pairs:
        resource.assign(value)
    return []


def proximal(prox, lr, l1, l2):
    """The FOBOS step after the gradient step `prox`: soft-threshold by lr * l1 when l1 > 0, shrink by 1 + lr * l2."""
    shrunk = jnp.where(l1 > 0, jnp.sign(prox) * jnp.maximum(jnp.abs(prox) - lr * l1, 0), prox)
    return shrunk / (1 + l2 * lr)


@register_op("ResourceApplyGradientDescent", dtypes=FLOAT, foldable=False)
def apply_gradient_descent(ctx, var, alpha, delta, *, T, use_locking):
    w, alpha, delta = operands(ctx, T, var, alpha, delta)
    return assign((var, w - delta * alpha))


@register_op("ResourceApplyProximalGradientDescent", dtypes=FLOAT, foldable=False)
def apply_proximal_gradient_descent(ctx, var, alpha, l1, l2, delta, *, T, use_locking):
    w, alpha, l1, l2, delta = operands(ctx, T, var, alpha, l1, l2, delta)
    return assign((var, proximal(w - delta * alpha, alpha, l1, l2)))


@register_op("ResourceApplyProximalAdagrad", dtypes=FLOAT, foldable=False)
def apply_proximal_adagrad(ctx, var, accum, lr, l1, l2, grad, *, T, use_locking):
    w, a, lr, l1, l2, g = operands(ctx, T, var, accum, lr, l1, l2, grad)
    a = a + g * g
    rate = lr * lax.rsqrt(a)
    return assign((var, proximal(w - g * rate, rate, l1, l2)), (accum, a))


@register_op("ResourceApplyMomentum", "ResourceApplyKerasMomentum", dtypes=FLOAT, foldable=False)
def apply_momentum(ctx, var, accum, lr, grad, momentum, *, T, use_locking, use_nesterov):
    w, a, lr, g, mu = operands(ctx, T, var, accum, lr, grad, momentum)
    if ctx.node.op == "ResourceApplyKerasMomentum":  # the slot holds the step, learning rate included
        a = a * mu - g * lr
        w = w + (a * mu - g * lr if use_nesterov else a)
    else:
        a = a * mu + g
        w = w - (g * lr + a * mu * lr if use_nesterov else a * lr)
    return assign((var, w), (accum, a))


@register_op("ResourceApplyAdagrad", dtypes=FLOAT, foldable=False)
def apply_adagrad(ctx, var, accum, lr, grad, *, T, use_locking, update_slots):
    w, a, lr, g = operands(ctx, T, var, accum, lr, grad)
    a = a + g * g if update_slots else a
    return assign((var, w - g * lr * lax.rsqrt(a)), (accum, a))


@register_op("ResourceApplyAdagradV2", dtypes=FLOAT, foldable=False)
def apply_adagrad_v2(ctx, var, accum, lr, epsilon, grad, *, T, use_locking, update_slots):
    w, a, lr, epsilon, g = operands(ctx, T, var, accum, lr, epsilon, grad)
    a = a + g * g if update_slots else a
    return assign((var, w - g * lr / (jnp.sqrt(a) + epsilon)), (accum, a))


@register_op("ResourceApplyAdagradDA", dtypes=FLOAT, foldable=False)
def apply_adagrad_da(ctx, var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2, global_step,
                     *, T, use_locking):
    _, a, aa, g, lr, l1, l2, step = operands(ctx, T, var, gradient_accumulator, gradient_squared_accumulator, grad,
                                             lr, l1, l2, global_step)
    a, aa, step = a + g, aa + g * g, jnp.asarray(step).astype(T)
    thresholded = jnp.where(l1 > 0, jnp.sign(a) * jnp.maximum(jnp.abs(a) - step * l1, 0), a)
    w = -lr * thresholded / (l2 * (step * lr) + jnp.sqrt(aa))
    return assign((var, w), (gradient_accumulator, a), (gradient_squared_accumulator, aa))


def adam_moments(m, v, g, lr, beta1_power, beta2_power, beta1, beta2):
    """Adam's bias-corrected step size and its updated first and second moments."""
    alpha = lr * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)
    return alpha, m + (g - m) * (1 - beta1), v + (g * g - v) * (1 - beta2)


@register_op("ResourceApplyAdam", dtypes=FLOAT, foldable=False)
def apply_adam(ctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, T, use_locking,
               use_nesterov):
    w, m1, v1, beta1_power, beta2_power, lr, beta1, beta2, epsilon, g = operands(
        ctx, T, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
    alpha, m1, v1 = adam_moments(m1, v1, g, lr, beta1_power, beta2_power, beta1, beta2)
    step = g * (1 - beta1) + beta1 * m1 if use_nesterov else m1
    return assign((var, w - step * alpha / (jnp.sqrt(v1) + epsilon)), (m, m1), (v, v1))


@register_op("ResourceApplyAdamWithAmsgrad", dtypes=FLOAT, foldable=False)
def apply_adam_with_amsgrad(ctx, var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, T,
                            use_locking):
    w, m1, v1, vhat1, beta1_power, beta2_power, lr, beta1, beta2, epsilon, g = operands(
        ctx, T, var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
    alpha, m1, v1 = adam_moments(m1, v1, g, lr, beta1_power, beta2_power, beta1, beta2)
    vhat1 = jnp.maximum(vhat1, v1)
    return assign((var, w - m1 * alpha / (jnp.sqrt(vhat1) + epsilon)), (m, m1), (v, v1), (vhat, vhat1))


@register_op("ResourceApplyAdaMax", dtypes=FLOAT, foldable=False)
def apply_ada_max(ctx, var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad, *, T, use_locking):
    w, m1, v1, beta1_power, lr, beta1, beta2, epsilon, g = operands(
        ctx, T, var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad)
    m1 = m1 + (g - m1) * (1 - beta1)
    v1 = jnp.maximum(beta2 * v1, jnp.abs(g))
    return assign((var, w - lr / (1 - beta1_power) * (m1 / (v1 + epsilon))), (m, m1), (v, v1))


@register_op("ResourceApplyAdadelta", dtypes=FLOAT, foldable=False)
def apply_adadelta(ctx, var, accum, accum_update, lr, rho, epsilon, grad, *, T, use_locking):
    w, a, u, lr, rho, epsilon, g = operands(ctx, T, var, accum, accum_update, lr, rho, epsilon, grad)
    a = a * rho + g * g * (1 - rho)
    update = jnp.sqrt(u + epsilon) * lax.rsqrt(a + epsilon) * g
    u = u * rho + update * update * (1 - rho)
    return assign((var, w - update * lr), (accum, a), (accum_update, u))


@register_op("ResourceApplyRMSProp", dtypes=FLOAT, foldable=False)
def apply_rms_prop(ctx, var, ms, mom, lr, rho, momentum, epsilon, grad, *, T, use_locking):
    w, ms1, mom1, lr, rho, momentum, epsilon, g = operands(ctx, T, var, ms, mom, lr, rho, momentum, epsilon, grad)
    ms1 = ms1 + (g * g - ms1) * (1 - rho)
    mom1 = mom1 * momentum + g * lr / jnp.sqrt(ms1 + epsilon)
    return assign((var, w - mom1), (ms, ms1), (mom, mom1))


@register_op("ResourceApplyCenteredRMSProp", dtypes=FLOAT, foldable=False)
def apply_centered_rms_prop(ctx, var, mg, ms, mom, lr, rho, momentum, epsilon, grad, *, T, use_locking):
    w, mg1, ms1, mom1, lr, rho, momentum, epsilon, g = operands(
        ctx, T, var, mg, ms, mom, lr, rho, momentum, epsilon, grad)
    ms1 = ms1 + (g * g - ms1) * (1 - rho)
    mg1 = mg1 + (g - mg1) * (1 - rho)
    mom1 = mom1 * momentum + g * lr / jnp.sqrt(ms1 - mg1 * mg1 + epsilon)
    return assign((var, w - mom1), (mg, mg1), (ms, ms1), (mom, mom1))


def ftrl(slots, w, a, z, g, shrunk_g, lr, l1, l2, lr_power, multiply_linear_by_lr) -> list:
    """FTRL-proximal as TF's dense kernels compute it, assigned to `slots` (var, accum, linear); `shrunk_g` is
    the gradient with FtrlV2's L2 shrinkage (else g).
    lr_power -0.5, the usual one, takes square roots as TF's kernels do rather than powers."""
    def power(x):
        return jnp.where(lr_power == -0.5, jnp.sqrt(x), x ** -lr_power)
    new_a = a + g * g
    if multiply_linear_by_lr:  # `linear` holds lr times TF's usual accumulator
        z = z + shrunk_g * lr - (power(new_a) - power(a)) * w
        l1, quadratic = l1 * lr, power(new_a) + 2 * l2 * lr
    else:
        z = z + shrunk_g - (power(new_a) - power(a)) / lr * w
        quadratic = power(new_a) / lr + 2 * l2
    w = jnp.where(jnp.abs(z) > l1, (l1 * jnp.sign(z) - z) / quadratic, 0)
    return assign(*zip(slots, (w, new_a, z)))


@register_op("ResourceApplyFtrl", dtypes=FLOAT, foldable=False)
def apply_ftrl(ctx, var, accum, linear, grad, lr, l1, l2, lr_power, *, T, use_locking, multiply_linear_by_lr):
    w, a, z, g, lr, l1, l2, lr_power = operands(ctx, T, var, accum, linear, grad, lr, l1, l2, lr_power)
    return ftrl((var, accum, linear), w, a, z, g, g, lr, l1, l2, lr_power, multiply_linear_by_lr)


@register_op("ResourceApplyFtrlV2", dtypes=FLOAT, foldable=False)
def apply_ftrl_v2(ctx, var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power, *, T, use_locking,
                  multiply_linear_by_lr):
    w, a, z, g, lr, l1, l2, l2_shrinkage, lr_power = operands(
        ctx, T, var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power)
    return ftrl((var, accum, linear), w, a, z, g, g + 2 * l2_shrinkage * w, lr, l1, l2, lr_power,
                multiply_linear_by_lr)


@register_op("ResourceApplyAddSign", dtypes=FLOAT, foldable=False)
def apply_add_sign(ctx, var, m, lr, alpha, sign_decay, beta, grad, *, T, use_locking):
    w, m1, lr, alpha, sign_decay, beta, g = operands(ctx, T, var, m, lr, alpha, sign_decay, beta, grad)
    m1 = m1 * beta + g * (1 - beta)
    return assign((var, w - lr * (alpha + sign_decay * jnp.sign(g) * jnp.sign(m1)) * g), (m, m1))


@register_op("ResourceApplyPowerSign", dtypes=FLOAT, foldable=False)
def apply_power_sign(ctx, var, m, lr, logbase, sign_decay, beta, grad, *, T, use_locking):
    w, m1, lr, logbase, sign_decay, beta, g = operands(ctx, T, var, m, lr, logbase, sign_decay, beta, grad)
    m1 = m1 * beta + g * (1 - beta)
    return assign((var, w - lr * jnp.exp(logbase * sign_decay * jnp.sign(g) * jnp.sign(m1)) * g), (m, m1))
