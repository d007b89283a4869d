"""Optimizer updates (ResourceApply*) against TensorFlow: a tf.function applies one op to resource variables, xlacs
runs it for a few steps (each step's variables fed back as the next one's), and every variable and slot matches
TF's after the same steps; every attr variant; bad operands refused naming the input."""
import re

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from tests.graphs import GraphBuilder
from tests.lower.test_variables import unfrozen
from tests.training.keras_step import KERAS_OPTIMIZERS, classification_batches, keras_step
from xlacs import error_details
from xlacs_server.graph import attrs

ADAM = dict(beta1_power=0.729, beta2_power=0.997, lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-7)
RMS = dict(lr=0.01, rho=0.9, momentum=0.5, epsilon=1e-7)
FTRL = dict(lr=0.1, l1=0.05, l2=0.02, lr_power=-0.5)
SIGN = dict(lr=0.1, sign_decay=0.5, beta=0.9)
# op -> (its scalar inputs, its attr variants); the variable, its slots and the gradient come from the OpDef
CASES = {
    "ResourceApplyGradientDescent": (dict(alpha=0.1), [{}]),
    "ResourceApplyProximalGradientDescent": (dict(alpha=0.1, l1=0.05, l2=0.02), [{}]),
    "ResourceApplyProximalAdagrad": (dict(lr=0.1, l1=0.05, l2=0.02), [{}]),
    "ResourceApplyMomentum": (dict(lr=0.1, momentum=0.9), [{}, {"use_nesterov": True}]),
    "ResourceApplyKerasMomentum": (dict(lr=0.1, momentum=0.9), [{}, {"use_nesterov": True}]),
    "ResourceApplyAdagrad": (dict(lr=0.1), [{}, {"update_slots": False}, {"use_locking": True}]),
    "ResourceApplyAdagradV2": (dict(lr=0.1, epsilon=1e-7), [{}, {"update_slots": False}]),
    "ResourceApplyAdagradDA": (dict(lr=0.1, l1=0.01, l2=0.02, global_step=np.int64(3)), [{}]),
    "ResourceApplyAdam": (ADAM, [{}, {"use_nesterov": True}]),
    "ResourceApplyAdamWithAmsgrad": (ADAM, [{}]),
    "ResourceApplyAdaMax": ({k: v for k, v in ADAM.items() if k != "beta2_power"}, [{}]),
    "ResourceApplyAdadelta": (dict(lr=1.0, rho=0.95, epsilon=1e-6), [{}]),
    "ResourceApplyRMSProp": (RMS, [{}]),
    "ResourceApplyCenteredRMSProp": (RMS, [{}]),
    "ResourceApplyFtrl": (FTRL, [{}, {"multiply_linear_by_lr": True}]),
    "ResourceApplyFtrlV2": (dict(FTRL, l2_shrinkage=0.01), [{}, {"multiply_linear_by_lr": True}]),
    "ResourceApplyAddSign": (dict(SIGN, alpha=1.0), [{}]),
    "ResourceApplyPowerSign": (dict(SIGN, logbase=float(np.log(2))), [{}]),
}
# Hyperparameters that take other branches of the kernels: no L1 term, an lr_power without a square root.
VARIANTS = [
    ("ResourceApplyProximalGradientDescent", dict(l1=0.0), {}),
    ("ResourceApplyAdagradDA", dict(l1=0.0), {}),
    ("ResourceApplyFtrl", dict(lr_power=-0.3), {}),
    ("ResourceApplyFtrl", dict(lr_power=-0.3), {"multiply_linear_by_lr": True}),
    ("ResourceApplyFtrlV2", dict(lr_power=-0.7), {}),
]
# Slots that TF's formulas take square roots or powers of start positive.
POSITIVE = {"accum", "v", "vhat", "ms", "accum_update", "gradient_squared_accumulator"}
GRADIENTS = ("grad", "delta")
SHAPE = (3, 4)
STEPS = 3

PARAMS = [(op, {}, a) for op, (_, variants) in CASES.items() for a in variants] + VARIANTS


def case_id(param) -> str:
    op, scalars, attr_values = param
    return op.removeprefix("ResourceApply") + "".join(f"-{k}={v}" for k, v in {**scalars, **attr_values}.items())


def resource_inputs(op: str) -> list[str]:
    return [a.name for a in op_def_registry.get(op).input_arg if a.type == tf.resource.as_datatype_enum]


def initial_value(name: str, rng, dtype) -> np.ndarray:
    if name in POSITIVE:
        return rng.uniform(0.1, 1.0, SHAPE).astype(dtype)
    return rng.normal(0, 0.1 if name == "mg" else 1.0, SHAPE).astype(dtype)


def training_step(op: str, scalars: dict, attr_values: dict, dtype):
    """The op's variables and a tf.function applying it once to them with a fed gradient."""
    rng = np.random.default_rng(len(op))
    variables = {name: tf.Variable(initial_value(name, rng, dtype), name=name) for name in resource_inputs(op)}
    gradient = next(a.name for a in op_def_registry.get(op).input_arg if a.name in GRADIENTS)
    hyper = {k: tf.constant(v, dtype=tf.int64 if k == "global_step" else dtype) for k, v in scalars.items()}
    apply = getattr(tf.raw_ops, op)

    @tf.function
    def step(g):
        apply(**{name: v.handle for name, v in variables.items()}, **hyper, **{gradient: g}, **attr_values)
        return tf.add_n([tf.reduce_sum(v.read_value()) for v in variables.values()])  # reads capture them all
    return variables, step


def compile_step(client, step, dtype):
    """The step compiled unfrozen with its gradient fed: the executable, its feeds, and the tf.Variables by the
    executable's input names."""
    data, feeds, fetches, captured = unfrozen(step, tf.TensorSpec(SHAPE, dtype))
    declared = {name: spec for name, (spec, _) in captured.items()}
    executable = client.compile(data, {feeds[0]: (dtype, SHAPE), **declared}, fetches)
    return executable, feeds, {"variables/" + name.rsplit(":", 1)[0]: var for name, (_, var) in captured.items()}


@pytest.mark.parametrize("param", PARAMS, ids=case_id)
def test_steps_match_tensorflow(client, param):
    op, scalar_overrides, attr_values = param
    scalars = {**CASES[op][0], **scalar_overrides}
    variables, step = training_step(op, scalars, attr_values, np.float32)
    executable, feeds, by_input = compile_step(client, step, np.float32)
    initial = {name: var.numpy() for name, var in by_input.items()}
    gradients = np.random.default_rng(7).normal(size=(STEPS, *SHAPE)).astype(np.float32)
    _, state = train_in_xlacs(executable, feeds, initial, [(g,) for g in gradients])
    for g in gradients:
        step(tf.constant(g))  # TF's own steps update the tf.Variables
    assert len(by_input) == len(variables)
    for name, var in by_input.items():
        want = var.numpy()
        np.testing.assert_allclose(state[name], want, rtol=2e-5, atol=2e-6 * max(1.0, np.abs(want).max()),
                                   err_msg=f"{op} {attr_values}: {var.name}")
    var_input = next(n for n, v in by_input.items() if v is variables["var"])
    assert not np.allclose(state[var_input], initial[var_input])


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_adam_at_other_float_dtypes(client, dtype):
    _, step = training_step("ResourceApplyAdam", ADAM, {}, dtype)
    executable, feeds, by_input = compile_step(client, step, dtype)
    g = np.random.default_rng(3).normal(size=SHAPE).astype(dtype)
    inputs = {name: var.numpy() for name, var in by_input.items()}
    outputs = dict(zip(executable.output_names, executable.execute({feeds[0]: g, **inputs})))
    step(tf.constant(g))
    tolerance = {"rtol": 1e-12} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
    for name, var in by_input.items():
        np.testing.assert_allclose(outputs[name], var.numpy(), **tolerance)


def momentum_graph(var_dtype=np.float32, accum_shape=SHAPE, lr=np.float32(0.1), grad_shape=SHAPE, T=np.float32):
    """ResourceApplyMomentum on two VarHandleOps (TF's graph builder would refuse the bad ones), fetched through a
    read of the variable after it."""
    b = GraphBuilder()
    b.node("var", "VarHandleOp", dtype=np.dtype(var_dtype), shape=attrs.Shape(SHAPE), shared_name="var")
    b.node("accum", "VarHandleOp", dtype=np.dtype(np.float32), shape=attrs.Shape(accum_shape), shared_name="accum")
    b.const("lr", lr)
    b.const("momentum", np.float32(0.9))
    b.placeholder("grad", grad_shape)
    b.op("apply", "ResourceApplyMomentum", "var", "accum", "lr", "grad", "momentum", T=T)
    b.node("read", "ReadVariableOp", "var", "^apply", dtype=np.dtype(var_dtype))
    return b.bytes(), {"grad:0": (np.float32, grad_shape)}


@pytest.mark.parametrize("graph, blame, match", [
    (dict(grad_shape=(4, 3)), "grad", r"input 'grad' has shape \[4, 3\], but variable 'var' has \[3, 4\]"),
    (dict(accum_shape=(3,)), "accum", r"input 'accum' has shape \[3\], but variable 'var' has \[3, 4\]"),
    (dict(lr=np.float32([0.1, 0.2])), "lr", r"input 'lr' must have rank 0, but has shape \[2\]"),
    (dict(var_dtype=np.float64), "var", r"input 'var' has dtype float64, but T is float32"),
], ids=["grad-shape", "slot-shape", "lr-not-scalar", "var-dtype"])
def test_bad_operands_are_invalid_argument_naming_the_input(client, graph, blame, match):
    data, feeds = momentum_graph(**graph)
    with pytest.raises(grpc.RpcError) as e:
        client.compile(data, feeds, ["read:0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert e.value.details().startswith("node 'apply' (ResourceApplyMomentum): "), e.value.details()
    assert error_details(e.value).metadata.get("input") == blame
    assert re.search(match, e.value.details()), e.value.details()


def test_integer_t_is_unimplemented_naming_the_attr(client):
    """TF's OpDef allows integer variables (its CPU kernels do not); the lowerings, as tf2xla's, take floats."""
    data, feeds = momentum_graph(T=np.int32)
    with pytest.raises(grpc.RpcError) as e:
        client.compile(data, feeds, ["read:0"])
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, e.value.details()
    assert error_details(e.value).metadata.get("attr") == "T"
    assert "T=int32" in e.value.details() and "ResourceApplyMomentum" in e.value.details()


def train_in_xlacs(executable, feeds: list[str], inputs: dict, batches) -> tuple[list, dict]:
    """Runs `executable` once per batch, each step's assigned variables fed to the next: the first output of each
    step and the variables' last values by input name."""
    state, first_outputs = dict(inputs), []
    for batch in batches:
        outputs = executable.execute({**dict(zip(feeds, batch)), **state})
        first_outputs.append(outputs[0])
        updated = dict(zip(executable.output_names[1:], outputs[1:]))
        assert set(updated) <= set(state)
        state.update(updated)
    return first_outputs, state


@pytest.mark.parametrize("name", KERAS_OPTIMIZERS)
def test_keras_training_step_matches_tensorflow(client, name):
    """A Keras classifier's tf.function training step with optimizer.apply_gradients (Keras 3 writes its updates
    as Assign*VariableOp, not ResourceApply*): 100 steps through xlacs, the losses and every variable (weights,
    slots, the iteration count) as TF's after the same steps."""
    step, executable, variables = keras_step(client, KERAS_OPTIMIZERS[name]())
    feeds = executable.feed_names
    by_input = {"variables/" + n: var for n, var in variables.items()}
    batches = classification_batches(100)
    initial = {n: v.numpy() for n, v in by_input.items()}
    losses, state = train_in_xlacs(executable, feeds, initial, batches)
    want_losses = [float(step(tf.constant(x), tf.constant(y))) for x, y in batches]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4, atol=1e-5)
    assert len(by_input) > 4  # the 4 weights, the slots and the iteration count
    kernel = next(n for n, v in by_input.items() if tuple(v.shape) == (4, 8))
    assert not np.allclose(state[kernel], initial[kernel], atol=1e-3)  # it trained
    for input_name, var in by_input.items():
        want = var.numpy()
        np.testing.assert_allclose(state[input_name], want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()),
                                   err_msg=var.name)


TF1_OPTIMIZERS = {
    "GradientDescent": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "Momentum-nesterov": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "Adam": lambda: tf.compat.v1.train.AdamOptimizer(0.01),
    "Adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
    "AdagradDA": lambda: tf.compat.v1.train.AdagradDAOptimizer(
        0.1, tf.compat.v1.train.get_or_create_global_step(), l1_regularization_strength=0.001),
    "Adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0),
    "RMSProp": lambda: tf.compat.v1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "RMSProp-centered": lambda: tf.compat.v1.train.RMSPropOptimizer(0.01, centered=True),
    "Ftrl": lambda: tf.compat.v1.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01),
    "FtrlV2": lambda: tf.compat.v1.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=0.01),
    "ProximalGradientDescent": lambda: tf.compat.v1.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.001),
    "ProximalAdagrad": lambda: tf.compat.v1.train.ProximalAdagradOptimizer(0.1, l2_regularization_strength=0.01),
}


@pytest.mark.parametrize("name", TF1_OPTIMIZERS)
def test_tf1_optimizer_graph_matches_a_session(client, name):
    """tf.compat.v1.train's optimizers build their updates from ResourceApply* ops on VarHandleOps: a softmax
    classifier's minimize() graph trains 20 steps through xlacs as in a TF session, losses and variables."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (16, 4), name="x")
        y = tf.compat.v1.placeholder(tf.int32, (16,), name="y")
        w = tf.compat.v1.get_variable("w", (4, 3), initializer=tf.compat.v1.glorot_uniform_initializer(seed=1),
                                      use_resource=True)
        b = tf.compat.v1.get_variable("b", (3,), initializer=tf.compat.v1.zeros_initializer(), use_resource=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.matmul(x, w) + b))
        optimizer = TF1_OPTIMIZERS[name]()
        train = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        with tf.control_dependencies([train]):
            tf.identity(loss, name="trained")
        variables = tf.compat.v1.global_variables()
        assert any(op.type.startswith("ResourceApply") for op in graph.get_operations())
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    executable = client.compile(graph.as_graph_def().SerializeToString(),
                                {"x:0": (np.float32, (16, 4)), "y:0": (np.int32, (16,))}, ["trained:0"])
    by_input = {"variables/" + v.op.name: v for v in variables}
    assert set(executable.input_names[2:]) == set(by_input)
    batches = classification_batches(20)
    initial = dict(zip(by_input, session.run(list(by_input.values()))))
    losses, state = train_in_xlacs(executable, ["x:0", "y:0"], initial, batches)
    with session:
        want_losses = [session.run("trained:0", {"x:0": bx, "y:0": by}) for bx, by in batches]
        final = dict(zip(by_input, session.run(list(by_input.values()))))
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4, atol=1e-5)
    assert not np.allclose(state["variables/w"], initial["variables/w"], atol=1e-3)  # it trained
    for input_name, want in final.items():
        np.testing.assert_allclose(state[input_name], want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()),
                                   err_msg=input_name)
