"""TensorList ops and the TensorArrayV3 family on static buffers, against TensorFlow."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests import tf1
from tests.lower.refusals import assert_refused, assert_refused_as_tf, ints
from tests.oracle import assert_close, compile_and_compare

raw = tf.raw_ops
rng = np.random.default_rng(0)
F32 = tf.float32


def list_ops(x):
    lst = raw.TensorListFromTensor(tensor=x, element_shape=[3])
    item = raw.TensorListGetItem(input_handle=lst, index=2, element_shape=[3], element_dtype=F32)
    lst = raw.TensorListSetItem(input_handle=lst, index=1, item=item * 2.0)
    concat, lengths = raw.TensorListConcatV2(input_handle=lst, element_shape=[3], leading_dims=tf.zeros([0], tf.int64),
                                             element_dtype=F32)
    return (raw.TensorListStack(input_handle=lst, element_shape=[3], element_dtype=F32, num_elements=4),
            raw.TensorListLength(input_handle=lst), raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32),
            raw.TensorListGather(input_handle=lst, indices=[3, 0, 3], element_shape=[3], element_dtype=F32),
            concat, lengths)


def push_and_pop(x):
    lst = raw.EmptyTensorList(element_shape=[3], max_num_elements=5, element_dtype=F32)
    for i in range(3):
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x[i] * float(i + 1))
    lst, last = raw.TensorListPopBack(input_handle=lst, element_shape=[3], element_dtype=F32)
    return raw.TensorListStack(input_handle=lst, element_shape=[3], element_dtype=F32), last, \
        raw.TensorListLength(input_handle=lst)


def unknown_element_shape(x):
    """A list made without an element shape learns it from the first write."""
    lst = raw.TensorListReserve(element_shape=-1, num_elements=4, element_dtype=F32)
    for i in range(4):
        lst = raw.TensorListSetItem(input_handle=lst, index=3 - i, item=tf.sin(x[i]))
    return raw.TensorListStack(input_handle=lst, element_shape=-1, element_dtype=F32)


@pytest.mark.parametrize("fn", [list_ops, push_and_pop, unknown_element_shape], ids=lambda f: f.__name__)
def test_tensor_list_ops(client, fn):
    compile_and_compare(client, fn, [rng.normal(size=(4, 3)).astype(np.float32)])


def tensor_array_in_loop(x):
    """tf.TensorArray without an element shape, written in a loop: the list's buffer is only known after
    tracing the body once."""
    steps = x.shape[0]
    inputs = tf.TensorArray(F32, steps).unstack(x)

    def body(i, acc, out):
        acc = tf.tanh(acc + inputs.read(i))
        return i + 1, acc, out.write(i, acc * 2.0)
    _, acc, out = tf.while_loop(lambda i, *_: i < steps, body, (0, tf.zeros(x.shape[1:]), tf.TensorArray(F32, steps)))
    return out.stack(), acc


@pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
def test_tensor_array_written_in_a_loop(client, lower_control_flow):
    compile_and_compare(client, tensor_array_in_loop, [rng.normal(size=(5, 2, 3)).astype(np.float32)],
                        lower_control_flow=lower_control_flow)


def test_full_list_is_an_error_naming_the_node(client):
    def overfull(x):
        lst = raw.EmptyTensorList(element_shape=[3], max_num_elements=1, element_dtype=F32)
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x)
        return raw.TensorListStack(input_handle=raw.TensorListPushBack(input_handle=lst, tensor=x),
                                   element_shape=[3], element_dtype=F32)
    with pytest.raises(grpc.RpcError) as e:
        compile_and_compare(client, overfull, [np.zeros(3, np.float32)])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "TensorListPushBack" in e.value.details() and "room for 1 element" in e.value.details()


def tensor_array_v3_graph():
    """A TF1 dynamic_rnn-like graph: unstack the input, read and write TensorArrays in a while loop, stack,
    concat, split and size them, and write into a gradient array."""
    graph = tf.Graph()
    with tf1.control_flow_v1(), graph.as_default():
        x = tf.compat.v1.placeholder(F32, [5, 3], name="x")
        inputs = tf.TensorArray(F32, size=5).unstack(x)

        def body(i, acc, out):
            acc = tf.tanh(acc * 0.5 + inputs.read(i))
            return i + 1, acc, out.write(i, acc * 2.0)
        out = tf.TensorArray(F32, size=5, clear_after_read=False)
        _, acc, out = tf.while_loop(lambda i, *_: i < 5, body, (0, tf.zeros([3]), out))
        pieces = tf.TensorArray(F32, size=3).split(tf.reshape(x, [15]), [5, 5, 5])
        grad_handle, grad_flow = tf.raw_ops.TensorArrayGradV3(handle=out.handle, flow_in=out.flow, source="grad")
        grad_flow = tf.raw_ops.TensorArrayWriteV3(handle=grad_handle, index=1, value=acc, flow_in=grad_flow)
        with tf.control_dependencies([acc]):  # the loop has read everything
            closed = tf.raw_ops.TensorArrayCloseV3(handle=inputs.handle)
        with tf.control_dependencies([closed]):
            outputs = {"acc": acc, "stacked": out.stack(), "concat": out.concat(), "gathered": out.gather([4, 0]),
                       "size": tf.raw_ops.TensorArraySizeV3(handle=out.handle, flow_in=out.flow),
                       "piece": pieces.read(1),
                       "grad": tf.raw_ops.TensorArrayReadV3(handle=grad_handle, index=1, flow_in=grad_flow, dtype=F32)}
            fetches = [tf.identity(t, name=name).name for name, t in outputs.items()]
    return graph, fetches


def test_tensor_array_v3_family(client):
    graph, fetches = tensor_array_v3_graph()
    ops = {n.op for n in graph.as_graph_def().node}
    assert {"TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
            "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3", "TensorArrayGradV3",
            "TensorArrayCloseV3", "Enter"} <= ops
    x = rng.normal(size=(5, 3)).astype(np.float32)
    want = tf1.run(graph, {"x:0": x}, fetches)
    got = client.compile(graph.as_graph_def(), {"x:0": (np.float32, (5, 3))}, fetches).execute({"x:0": x})
    for g, w in zip(got, want):
        assert_close(g, w)


def stack_graph(max_size: int):
    """Push in one TF1 loop, pop in another and once more after it: last in, first out across loops."""
    graph = tf.Graph()
    with tf1.control_flow_v1(), graph.as_default():
        x = tf.compat.v1.placeholder(F32, [3], name="x")
        handle = tf.raw_ops.StackV2(max_size=max_size, elem_type=F32, stack_name="acc")

        def push(i, a):
            with tf.control_dependencies([tf.raw_ops.StackPushV2(handle=handle, elem=a)]):
                return i + 1, tf.sin(a) + 1.0
        _, last = tf.while_loop(lambda i, a: i < 4, push, (0, x))

        def pop(i, total):
            with tf.control_dependencies([total]):  # else TF1 may pop before the first loop pushed
                top = tf.ensure_shape(tf.raw_ops.StackPopV2(handle=handle, elem_type=F32), [3])
            return i + 1, total * 0.5 + top
        _, total = tf.while_loop(lambda i, t: i < 3, pop, (0, last))
        with tf.control_dependencies([total]):
            first = tf.raw_ops.StackPopV2(handle=handle, elem_type=F32)
        with tf.control_dependencies([first]):
            closed = tf.raw_ops.StackCloseV2(handle=handle)
        with tf.control_dependencies([closed]):
            fetches = [tf.identity(total, name="total").name, tf.identity(first, name="first").name]
    return graph, fetches


def test_stack_ops_across_loops(client):
    graph, fetches = stack_graph(max_size=5)
    x = rng.normal(size=(3,)).astype(np.float32)
    got = client.compile(graph.as_graph_def(), {"x:0": (np.float32, (3,))}, fetches).execute({"x:0": x})
    for g, w in zip(got, tf1.run(graph, {"x:0": x}, fetches)):
        assert_close(g, w)


def test_unbounded_stack_is_unimplemented_naming_the_node(client):
    """TF grows an unbounded stack at run time; an XLA buffer has a static size: xlacs' limit."""
    graph, fetches = stack_graph(max_size=-1)
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph.as_graph_def(), {"x:0": (np.float32, (3,))}, fetches)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "StackV2" in e.value.details() and "max_size" in e.value.details()


# id -> (op, inputs, attrs, blamed input, message pattern, TF refusing the same eagerly)
REFUSED = {
    "reserve_a_negative_size": ("TensorListReserve", {"element_shape": ints(3), "num_elements": ints(-1)[0]},
                                dict(element_dtype=np.float32, shape_type=np.int32), {"input": "num_elements"},
                                "must not be negative",
                                lambda: raw.TensorListReserve(element_shape=[3], num_elements=-1, element_dtype=F32)),
    "array_of_a_negative_size": ("TensorArrayV3", {"size": ints(-1)[0]}, dict(dtype=np.float32), {"input": "size"},
                                 "must not be negative", lambda: raw.TensorArrayV3(size=-1, dtype=F32)),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


def test_unbounded_list_is_unimplemented(client):
    """TF grows a list made with max_num_elements=-1 at run time; an XLA buffer has a static size."""
    raw.EmptyTensorList(element_shape=[3], max_num_elements=-1, element_dtype=F32)  # TF takes it
    assert_refused(client, "EmptyTensorList", {"element_shape": ints(3), "max_num_elements": ints(-1)[0]},
                   blame={"input": "max_num_elements"}, code=grpc.StatusCode.UNIMPLEMENTED, match="unbounded",
                   element_dtype=np.float32, shape_type=np.int32)
