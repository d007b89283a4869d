"""The graph IR: nodes with decoded attrs and parsed endpoints, plus the function library."""
from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, NamedTuple

from xlacs_server.errors import InvalidGraph


class Endpoint(NamedTuple):
    """One output of a node: TF's `node:index`."""
    node: str
    index: int = 0

    @classmethod
    def parse(cls, name: str) -> "Endpoint":
        node, sep, index = name.rpartition(":")
        if sep and index.isdigit() and node:
            return cls(node, int(index))
        return cls(name, 0)

    def __str__(self) -> str:
        return f"{self.node}:{self.index}"


class FuncRef(NamedTuple):
    """A `func` attr: a function name with its attrs."""
    name: str
    attrs: dict


@dataclasses.dataclass
class Node:
    name: str
    op: str
    inputs: list[Endpoint]
    control_inputs: list[str]
    attrs: dict[str, Any]
    device: str = ""


@dataclasses.dataclass
class Graph:
    nodes: dict[str, Node]
    library: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> FunctionDef proto
    producer: int = 0
    # The compile unit's signature: fed endpoints are program parameters, fetches its results.
    feeds: list[Endpoint] = dataclasses.field(default_factory=list)
    fetches: list[Endpoint] = dataclasses.field(default_factory=list)
    feed_specs: list[tuple[Any, tuple[int, ...]]] = dataclasses.field(default_factory=list)  # (np.dtype, shape)
    # Resource variables of unfrozen graphs: program inputs after the feeds, supplied at Execute.
    variables: list[Endpoint] = dataclasses.field(default_factory=list)
    variable_specs: list[tuple[Any, tuple[int, ...]]] = dataclasses.field(default_factory=list)
    # Lifted weights (Const outputs): the last program parameters, bound at Execute.
    params: list[Endpoint] = dataclasses.field(default_factory=list)
    # Prepared weights (compile/prepare.py): outputs of the weight-only part, computed once per weight set by
    # the prepare program; in the per-call program they are the parameters after the lifted weights.
    prepared: list[Endpoint] = dataclasses.field(default_factory=list)
    prepared_specs: list[tuple[Any, tuple[int, ...]]] = dataclasses.field(default_factory=list)
    platform: str = "cpu"  # the target of the compile unit: "cpu" or "gpu"

    def replace(self, **changes) -> "Graph":
        return dataclasses.replace(self, **changes)

    def consumers(self) -> dict[str, list[str]]:
        """Node name -> the names of nodes reading it (data or control)."""
        out: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in self.nodes.values():
            for src in {e.node for e in node.inputs} | set(node.control_inputs):
                out[src].append(node.name)
        return out

    def reachable(self, roots, stop=frozenset()) -> set[str]:
        """Names of the nodes `roots` (names) reach through data and control edges, not looking past `stop`."""
        seen, queue = set(), deque(roots)
        while queue:
            name = queue.popleft()
            if name in seen:
                continue
            seen.add(name)
            if name not in stop:
                queue.extend(e.node for e in self.nodes[name].inputs)
                queue.extend(self.nodes[name].control_inputs)
        return seen

    def topological_order(self) -> list[Node]:
        """Nodes with every input before its reader. NextIteration -> Merge back edges of TF1 loops are
        ignored; any other cycle is an InvalidGraph. Iterative, so 10^5-deep chains need no recursion."""
        pending = {}
        for node in self.nodes.values():
            sources = {e.node for e in node.inputs} | set(node.control_inputs)
            if node.op == "Merge":
                sources = {s for s in sources if self.nodes[s].op != "NextIteration"}
            pending[node.name] = sources
        readers: dict[str, list[str]] = {name: [] for name in self.nodes}
        for name, sources in pending.items():
            for src in sources:
                readers[src].append(name)
        ready = deque(name for name, sources in pending.items() if not sources)
        remaining = {name: len(sources) for name, sources in pending.items()}
        order = []
        while ready:
            name = ready.popleft()
            order.append(self.nodes[name])
            for reader in readers[name]:
                remaining[reader] -= 1
                if remaining[reader] == 0:
                    ready.append(reader)
        if len(order) != len(self.nodes):
            stuck = sorted(name for name, count in remaining.items() if count > 0)
            raise InvalidGraph(f"the graph has a cycle through {len(stuck)} node(s), e.g. {stuck[:5]}")
        return order
