"""Convolution lowerings that test_ops_nn and test_ops_starter leave out, against TF: the V2 2-D backprops, the
removed V1 3-D backprops, depthwise convolutions and their backprops with EXPLICIT padding, dilations and NCHW,
and the generic DepthwiseConv2dNative rule (the one a GPU uses; this CPU runs cpu.py's override).

TF's CPU kernels refuse some of these (no Conv2DBackprop*V2 kernel, no V1 3-D backprop since GraphDef version 10,
NHWC only for the backprops and depthwise, no depthwise or 3-D backprop dilations): there the oracle is TF computing
the same thing another way, with the NHWC layout or a kernel whose taps are spread by zeros (a convolution with
kernel k at dilation d is one with dilated(k, d) at dilation 1).
"""
import jax
import numpy as np
import pytest
import tensorflow as tf

from tests.graphs import GraphBuilder
from tests.oracle import assert_close, compile_and_compare, ids, rand, specs_of, traced
from xlacs import freeze
from xlacs_server.config import Settings
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Endpoint
from xlacs_server.lower import registry
from xlacs_server.lower.engine import build_program
from xlacs_server.passes.registry import run_pipeline

raw = tf.raw_ops
HALF_TOLERANCE = dict(rtol=2e-2, atol=2e-2)


def to_channels_last(t):
    return tf.transpose(t, [0, *range(2, t.shape.rank), 1])


def to_channels_first(t):
    return tf.transpose(t, [0, t.shape.rank - 1, *range(1, t.shape.rank - 1)])


def per_dim(spatial, data_format, fill=1):
    """A per-dimension attr in data_format order from its spatial entries."""
    return [fill, fill, *spatial] if data_format.startswith("NC") else [fill, *spatial, fill]


def conv_attrs(strides, dilation, padding, data_format, nd=2):
    """Attrs for `nd` spatial dims; padding is SAME, VALID or the spatial (before, after) pairs of EXPLICIT."""
    attrs = dict(strides=per_dim([strides] * nd, data_format), dilations=per_dim([dilation] * nd, data_format),
                 data_format=data_format)
    if isinstance(padding, str):
        return dict(attrs, padding=padding)
    pairs = per_dim([list(p) for p in padding], data_format, fill=[0, 0])
    return dict(attrs, padding="EXPLICIT", explicit_paddings=[int(v) for pair in pairs for v in pair])


def spatial_rates(attrs):
    d = attrs["dilations"]
    return d[2:] if attrs["data_format"].startswith("NC") else d[1:-1]


def undilated(attrs):
    """The attrs for TF's channels-last kernels at dilation 1, for an oracle that spreads the kernel itself."""
    nd = len(attrs["strides"]) - 2
    last = dict(attrs, data_format="NHWC" if nd == 2 else "NDHWC", dilations=[1] * (nd + 2))
    if attrs["data_format"].startswith("NC"):
        last["strides"] = [1, *attrs["strides"][2:], 1]
        if "explicit_paddings" in attrs:
            last["explicit_paddings"] = [0, 0, *attrs["explicit_paddings"][4:], 0, 0]
    return last


def taps(rates):
    """The index of a dilated kernel's taps: every rate-th entry of each spatial dimension."""
    return tuple(slice(None, None, r) for r in rates)


def dilated(kernel, rates):
    """The kernel with rate - 1 zeros between its taps along each spatial dimension."""
    kernel = np.asarray(kernel)
    nd = len(rates)
    out = np.zeros([(k - 1) * r + 1 for k, r in zip(kernel.shape, rates)] + list(kernel.shape[nd:]), kernel.dtype)
    out[taps(rates)] = kernel
    return out


def forward_shape(forward, x_shape, w_shape, attrs):
    """The output shape of a forward convolution, in attrs' data_format."""
    x, = channels_last_args(attrs["data_format"], tf.zeros(x_shape))
    y = forward(input=x, filter=dilated(np.zeros(w_shape, np.float32), spatial_rates(attrs)), **undilated(attrs))
    return tuple((to_channels_first(y) if attrs["data_format"].startswith("NC") else y).shape)


def in_layout(nhwc_shape, data_format):
    """An NHWC (NDHWC) shape in data_format's order."""
    s = nhwc_shape
    return (s[0], s[-1], *s[1:-1]) if data_format.startswith("NC") else tuple(s)


# (strides, dilation, padding); an explicit padding is the spatial (before, after) pairs
CASES_2D = [(1, 1, "SAME"), (2, 1, "VALID"), (3, 1, "SAME"), (1, 2, "VALID"), (1, 2, "SAME"),
            (2, 1, ((1, 2), (2, 0))), (1, 2, ((0, 1), (1, 1)))]


def case_id(case):
    strides, dilation, padding = case
    return f"s{strides}-d{dilation}-{padding if isinstance(padding, str) else 'EXPLICIT'}"


def channels_last_args(data_format, *tensors):
    """Tensors in data_format's layout, in channels-last layout."""
    return [to_channels_last(t) if data_format.startswith("NC") else t for t in tensors]


def backprops_oracle(backprop_input, backprop_filter, attrs):
    """A convolution's input and filter backprops (x, w, dy) -> (dx, dw) as TF's CPU kernels run them: the
    channels-last V1 ops `backprop_input` and `backprop_filter` on the kernel spread by its dilation, the filter
    gradient read back at the kernel's taps."""
    rates = spatial_rates(attrs)

    def oracle(x, w, dy):
        x, dy = channels_last_args(attrs["data_format"], x, dy)
        spread, last = dilated(w, rates), undilated(attrs)
        dx = backprop_input(input_sizes=tf.shape(x), filter=spread, out_backprop=dy, **last)
        dw = backprop_filter(input=x, filter_sizes=spread.shape, out_backprop=dy, **last)
        return to_channels_first(dx) if attrs["data_format"].startswith("NC") else dx, dw[taps(rates)]
    return oracle


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", CASES_2D, ids=case_id)
def test_conv2d_backprops_v2(client, case, data_format):
    """The V2 backprops take the input (filter) itself in place of its shape; TF has kernels for them only
    under XLA, so the oracle is the V1 ops, in NHWC and on a spread kernel (TF's CPU backprops refuse NCHW and
    dilations)."""
    x_shape = in_layout((2, 9, 8, 3), data_format)
    w_shape = (3, 2, 3, 5)
    attrs = conv_attrs(*case, data_format)
    dy = rand(forward_shape(raw.Conv2D, x_shape, w_shape, attrs))
    x, w = rand(x_shape), rand(w_shape)

    def fn(x, w, dy):
        return (raw.Conv2DBackpropInputV2(input=x, filter=w, out_backprop=dy, **attrs),
                raw.Conv2DBackpropFilterV2(input=x, filter=w, out_backprop=dy, **attrs))
    compile_and_compare(client, fn, [x, w, dy],
                        oracle=backprops_oracle(raw.Conv2DBackpropInput, raw.Conv2DBackpropFilter, attrs))


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=ids)
def test_conv2d_backprops_v2_dtypes(client, dtype):
    attrs = conv_attrs(2, 1, "SAME", "NHWC")
    x, w, dy = rand((1, 6, 6, 2), dtype), rand((3, 3, 2, 4), dtype), rand((1, 3, 3, 4), dtype)

    def fn(x, w, dy):
        return (raw.Conv2DBackpropInputV2(input=x, filter=w, out_backprop=dy, **attrs),
                raw.Conv2DBackpropFilterV2(input=x, filter=w, out_backprop=dy, **attrs))

    def oracle(x, w, dy):
        return (raw.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=dy, **attrs),
                raw.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(w), out_backprop=dy, **attrs))
    tolerance = HALF_TOLERANCE if dtype == np.float16 else dict(rtol=1e-10, atol=1e-12)
    compile_and_compare(client, fn, [x, w, dy], oracle=oracle, **tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=ids)
@pytest.mark.parametrize("strides,dilation,padding", [(1, 1, "SAME"), (2, 1, "VALID"), (2, 1, "SAME"),
                                                      (1, 2, "SAME"), (1, 2, "VALID")], ids=str)
def test_conv3d_backprops_v1(client, strides, dilation, padding, dtype):
    """Conv3DBackpropInput and Conv3DBackpropFilter, removed at GraphDef version 10, still come in older graphs:
    TF builds them no more, so the graph is made by hand and the oracle is the V2 ops on a spread kernel."""
    x_shape, w_shape = (1, 5, 6, 4, 2), (2, 3, 2, 2, 3)
    attrs = conv_attrs(strides, dilation, padding, "NDHWC", nd=3)
    del attrs["data_format"]  # the V1 ops are NDHWC only
    dy_shape = forward_shape(raw.Conv3D, x_shape, w_shape, dict(attrs, data_format="NDHWC"))
    b = GraphBuilder()
    for name, shape in (("x", x_shape), ("w", w_shape), ("dy", dy_shape)):
        b.placeholder(name, shape, dtype)
    b.op("dx", "Conv3DBackpropInput", "x", "w", "dy", T=dtype, **attrs)
    b.op("dw", "Conv3DBackpropFilter", "x", "w", "dy", T=dtype, **attrs)
    args = [rand(x_shape, dtype), rand(w_shape, dtype), rand(dy_shape, dtype)]
    feeds = {f"{n}:0": (dtype, a.shape) for n, a in zip(("x", "w", "dy"), args)}
    got = client.compile(b.bytes(), feeds, ["dx:0", "dw:0"]).execute(dict(zip(feeds, args)))

    x, w, dy = args
    rates = [dilation] * 3
    spread = dilated(w, rates)
    v2 = dict(attrs, dilations=[1] * 5)
    want_dx = raw.Conv3DBackpropInputV2(input_sizes=x.shape, filter=spread, out_backprop=dy, **v2)
    want_dw = raw.Conv3DBackpropFilterV2(input=x, filter_sizes=spread.shape, out_backprop=dy, **v2)[taps(rates)]
    tolerance = HALF_TOLERANCE if dtype == np.float16 else {}
    for g, want in zip(got, (want_dx, want_dw)):
        assert_close(g, np.asarray(want), **tolerance)


DEPTHWISE_CASES = CASES_2D + [(2, 2, "SAME")]


def depthwise_oracle(attrs):
    """DepthwiseConv2dNative as TF's CPU kernel runs it: NHWC, the dilation spread into the kernel."""
    rates = spatial_rates(attrs)

    def oracle(x, w):
        x, = channels_last_args(attrs["data_format"], x)
        y = raw.DepthwiseConv2dNative(input=x, filter=dilated(w, rates), **undilated(attrs))
        return to_channels_first(y) if attrs["data_format"].startswith("NC") else y
    return oracle


def depthwise_inputs(data_format, multiplier, dtype=np.float32):
    return [rand(in_layout((2, 9, 8, 3), data_format), dtype), rand((3, 2, 3, multiplier), dtype)]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=case_id)
def test_depthwise_conv2d_layouts(client, case, data_format):
    """The XLA:CPU rule (cpu.py), through the service."""
    attrs = conv_attrs(*case, data_format)
    compile_and_compare(client, lambda x, w: raw.DepthwiseConv2dNative(input=x, filter=w, **attrs),
                        depthwise_inputs(data_format, 2), oracle=depthwise_oracle(attrs))


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=case_id)
def test_conv2d_with_one_input_channel_per_group_is_a_depthwise_convolution(client, case, multiplier, data_format):
    """Keras' Conv2D(groups=channels) (ConvNeXt's 7x7): the XLA:CPU override runs it as DepthwiseConv2dNative's
    shifted multiply-adds, against TF's depthwise kernel with the filter [h, w, 1, channels * m] as [h, w, channels, m]."""
    attrs = conv_attrs(*case, data_format)
    x, w = depthwise_inputs(data_format, multiplier)
    compile_and_compare(client, lambda x, g: raw.Conv2D(input=x, filter=g, **attrs), [x, w.reshape(3, 2, 1, -1)],
                        oracle=lambda x, g: depthwise_oracle(attrs)(x, tf.reshape(g, w.shape)))


def grouped_oracle(attrs, groups):
    """A grouped Conv2D as one TF Conv2D per group (NHWC, the dilation spread into the kernel), concatenated."""
    rates = spatial_rates(attrs)

    def oracle(x, w):
        x, = channels_last_args(attrs["data_format"], x)
        y = tf.concat([raw.Conv2D(input=a, filter=dilated(b, rates), **undilated(attrs))
                       for a, b in zip(tf.split(x, groups, axis=3), tf.split(w, groups, axis=3))], axis=3)
        return to_channels_first(y) if attrs["data_format"].startswith("NC") else y
    return oracle


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=case_id)
def test_grouped_conv2d_runs_as_one_convolution_per_group(client, case, data_format):
    """ResNeXt's grouped 3x3: 3 groups of 4 input channels, 2 outputs each."""
    attrs = conv_attrs(*case, data_format)
    args = [rand(in_layout((2, 9, 8, 12), data_format)), rand((3, 2, 4, 6))]
    compile_and_compare(client, lambda x, w: raw.Conv2D(input=x, filter=w, **attrs), args,
                        oracle=grouped_oracle(attrs, 3))


def test_what_a_conv2d_lowers_to_on_cpu_by_its_groups():
    """One input channel per group: no convolution (shifted multiply-adds); 4 or more in up to 32 groups: one
    ungrouped convolution per group; else XLA's grouped convolution, as on any other platform."""
    attrs = conv_attrs(1, 1, "SAME", "NHWC")
    for channels, filter_shape, convolutions, groups in [(4, (3, 3, 1, 8), 0, None), (8, (3, 3, 4, 8), 2, 1),
                                                         (4, (3, 3, 4, 8), 1, 1), (4, (3, 3, 2, 8), 1, 2),
                                                         (256, (3, 3, 4, 256), 1, 64)]:
        lowered = lowered_for("cpu", lambda x, g: raw.Conv2D(input=x, filter=g, **attrs),
                              [rand((1, 6, 6, channels)), rand(filter_shape)]).as_text()
        assert lowered.count("stablehlo.convolution") == convolutions, filter_shape
        assert groups is None or f"feature_group_count = {groups} " in lowered, filter_shape


def lowered_for(platform: str, fn, args):
    """fn's frozen graph through the service's passes, lowered for `platform` and jitted on this machine's
    device: the way to run the generic rule of an op that has an XLA:CPU override."""
    frozen = freeze(traced(fn), *specs_of(args))
    graph = import_graph(frozen.graph_def, Settings())
    graph = graph.replace(feeds=[Endpoint.parse(f) for f in frozen.feeds],
                          fetches=[Endpoint.parse(f) for f in frozen.fetches],
                          feed_specs=[(a.dtype, a.shape) for a in args], platform=platform)
    graph, _ = run_pipeline(graph)
    assert not graph.params  # every argument is a feed
    return jax.jit(build_program(graph, graph.platform)).lower(*args)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=case_id)
def test_generic_depthwise_conv2d(case, multiplier, data_format):
    """The rule registered for every platform, lowered for "gpu": a grouped convolution, where the XLA:CPU
    override is shifted multiply-adds without one."""
    assert registry.lookup("DepthwiseConv2dNative", "gpu").platform is None
    attrs = conv_attrs(*case, data_format)
    args = depthwise_inputs(data_format, multiplier)

    def fn(x, w):
        return raw.DepthwiseConv2dNative(input=x, filter=w, **attrs)
    lowered = lowered_for("gpu", fn, args)
    assert "feature_group_count = 3" in lowered.as_text()
    got, = lowered.compile()(*args)
    assert_close(got, np.asarray(depthwise_oracle(attrs)(*[tf.constant(a) for a in args])))


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=ids)
def test_generic_depthwise_conv2d_dtypes(dtype):
    attrs = conv_attrs(2, 1, "SAME", "NHWC")
    args = depthwise_inputs("NHWC", 2, dtype)
    lowered = lowered_for("gpu", lambda x, w: raw.DepthwiseConv2dNative(input=x, filter=w, **attrs), args)
    got, = lowered.compile()(*args)
    want = np.asarray(raw.DepthwiseConv2dNative(input=args[0], filter=args[1], **attrs))
    assert_close(got, want, **(HALF_TOLERANCE if dtype == np.float16 else dict(rtol=1e-10, atol=1e-12)))


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=case_id)
def test_depthwise_backprops_layouts(client, case, data_format):
    """The oracle spreads the kernel itself: TF's CPU depthwise backprops accept dilations but ignore them."""
    x_shape, w_shape = in_layout((2, 9, 8, 3), data_format), (3, 2, 3, 2)
    attrs = conv_attrs(*case, data_format)
    dy = rand(forward_shape(raw.DepthwiseConv2dNative, x_shape, w_shape, attrs))

    def fn(x, w, dy):
        return (raw.DepthwiseConv2dNativeBackpropInput(input_sizes=tf.constant(x_shape), filter=w, out_backprop=dy,
                                                       **attrs),
                raw.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=tf.constant(w_shape), out_backprop=dy,
                                                        **attrs))
    oracle = backprops_oracle(raw.DepthwiseConv2dNativeBackpropInput, raw.DepthwiseConv2dNativeBackpropFilter, attrs)
    compile_and_compare(client, fn, [rand(x_shape), rand(w_shape), dy], oracle=oracle)
