"""The dashboard served on the session's live daemon, and real TF graphs for clients to compile through it."""
import dataclasses
import itertools
import pathlib

import httpx
import numpy as np
import pytest
import tensorflow as tf
from playwright.sync_api import sync_playwright

from xlacs.freeze import FrozenGraph, freeze
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer

REFRESH_S = 0.5  # pages refresh and the cache tiers are sampled this often in the tests
CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright never downloads a browser here
SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "test-output" / "dashboard"
_names = itertools.count()


@dataclasses.dataclass
class RunningDashboard:
    url: str
    app: object


@pytest.fixture(scope="session")
def dashboard(server):
    """The dashboard of the same Daemon that the session's gRPC server and `client` use."""
    app = create_app(server.service, refresh_s=REFRESH_S)
    http = HttpServer(app, "127.0.0.1", 0)
    http.start()
    yield RunningDashboard(f"http://127.0.0.1:{http.port}", app)
    http.stop()


@pytest.fixture
def http(dashboard):
    with httpx.Client(base_url=dashboard.url, timeout=60) as c:
        yield c


def shoot(page, name: str, full_page: bool = True) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


@pytest.fixture
def browser_page():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True).new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()


@dataclasses.dataclass
class Graph:
    """A frozen TF function with its inputs; `compile` names each distinct graph, so tests can find it."""
    frozen: FrozenGraph
    name: str

    def compile(self, client):
        return client.compile(self.frozen.graph_def, self.frozen.feeds, self.frozen.fetches, name=self.name)

    def inputs(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        return {n: rng.standard_normal(shape).astype(dtype) for n, (dtype, shape) in self.frozen.feeds.items()}


def dense_graph(rows: int, prefix: str = "dense") -> Graph:
    """relu(x @ w + b) then softmax: MatMul, BiasAdd, Relu, Softmax. `rows` picks the signature (a new key)."""
    w = tf.constant(np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32))
    b = tf.constant(np.arange(4, dtype=np.float32))

    def dense(x):
        return tf.nn.softmax(tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b)))
    frozen = freeze(tf.function(dense), tf.TensorSpec((rows, 8), tf.float32))
    return Graph(frozen, f"{prefix}_{next(_names)}")


def scale_graph(size: int) -> Graph:
    """x * 2 + 1 then a sum: Mul, AddV2, Sum."""
    def scale(x):
        return tf.reduce_sum(x * 2.0 + 1.0, axis=0)
    frozen = freeze(tf.function(scale), tf.TensorSpec((size, 3), tf.float32))
    return Graph(frozen, f"scale_{next(_names)}")
