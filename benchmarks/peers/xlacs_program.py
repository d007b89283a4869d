"""In-process JAX: the program xlacs compiles for the graph (same passes, lowering, PJRT options and weight
binding), compiled by a CompilationService in a process of its own and called as the daemon's Execute calls it
(LoadedExecutable.run), without the RPC. xlacs over gRPC against this is the service's overhead; the embedded
variant keeps every weight a constant of the program (lift_threshold_bytes=0), which measures what weight
lifting costs."""
from __future__ import annotations

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles
from xlacs import dtypes
from xlacs_server.config import Settings
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService


def build_with(graph: GraphFiles, settings: Settings) -> Call:
    """A new service with `settings` each time, with no cache beyond its own memory: every build compiles."""
    feeds, fetches = graph.signature()
    spec = CompileSpec(graph.graph_def, [(name, dtypes.from_numpy(dtype), shape)
                                         for name, (dtype, shape) in feeds.items()], fetches, wait_optimized=True)
    loaded = CompilationService(settings).compile(spec).loaded
    names = list(feeds)
    return lambda *arrays: loaded.run(dict(zip(names, arrays)))


def build_lifted(graph: GraphFiles) -> Call:
    return build_with(graph, Settings(cache_dir=""))


def build_embedded(graph: GraphFiles) -> Call:
    return build_with(graph, Settings(cache_dir="", lift_threshold_bytes=0))
