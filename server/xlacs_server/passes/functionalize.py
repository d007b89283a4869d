"""FunctionalizeControlFlow: TF1 dataflow control flow becomes functional While, If and Case nodes whose
bodies are generated library functions, as tf2xla's pass of that name does.

This is what freezing produces from Keras RNNs, tf.while_loop, tf.cond and tf.switch_case (lowering
control flow is convert_variables_to_constants_v2's default). Loops go first, innermost first: each
while-loop frame (the nodes between its Enter and Exit nodes) becomes a While node in its parent frame,
its condition and body becoming functions (with their conditionals functionalized). Then the
conditionals left in the graph become If and Case nodes (functionalize_cond.py).

A frame's loop variables follow TF1's pattern Enter -> Merge <- NextIteration, Merge -> Switch (on
the LoopCond) -> Exit (:0) and body (:1); a constant Enter is a loop invariant.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.errors import InvalidGraph
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import new_node
from xlacs_server.lower.check import FUNCTIONALIZED_OPS
from xlacs_server.passes.extract import Library, closure, cut, splice, unique_name
from xlacs_server.passes.functionalize_cond import functionalize_conds
from xlacs_server.passes.registry import Grouping, register_pass

Frame = tuple  # the frame names from the outermost loop in; () is the root


@register_pass(Grouping.POST_IMPORT, phase=10)
def functionalize_control_flow(graph: Graph) -> Graph:
    if not any(n.op in FUNCTIONALIZED_OPS for n in graph.nodes.values()):
        return graph
    library = Library(graph.library)
    frames = frames_of(graph)
    for frame in sorted({f for f in frames.values() if f}, key=len, reverse=True):
        graph = _functionalize_loop(graph, frame, frames, library)
    graph = functionalize_conds(graph, library)
    return graph.replace(library=library.functions)


def frames_of(graph: Graph) -> dict[str, Frame]:
    """The while-loop frame each node runs in: Enter enters its frame_name, Exit leaves the frame; other
    nodes run in their data inputs' frame (or, without data inputs, in their control inputs' deepest)."""
    frames: dict[str, Frame] = {}
    for node in graph.topological_order():
        sources = [e.node for e in node.inputs if e.node in frames]  # NextIteration back edges come later
        if node.op == "Enter":
            frames[node.name] = frames[node.inputs[0].node] + (node.attrs["frame_name"],)
        elif node.op == "Exit":
            inner = frames[node.inputs[0].node]
            if not inner:
                raise InvalidGraph(f"cannot functionalize Exit {node.name!r}: it is not inside a while loop")
            frames[node.name] = inner[:-1]
        elif sources:
            frames[node.name] = frames[sources[0]]
            for source in sources:
                if frames[source] != frames[node.name]:
                    raise InvalidGraph(
                        f"cannot functionalize node {node.name!r} ({node.op}): it reads {source!r} in frame "
                        f"{_frame_name(frames[source])} and {sources[0]!r} in frame {_frame_name(frames[node.name])}; "
                        "only an Enter may bring a value into a while loop")
        else:
            frames[node.name] = max((frames[c] for c in node.control_inputs), key=len, default=())
    return frames


def _frame_name(frame: Frame) -> str:
    return repr(frame[-1]) if frame else "<root>"


@dataclasses.dataclass
class LoopVariable:
    enter: Node
    merge: Node
    switch: Node
    next_iteration: Node
    exit: Node | None


def _functionalize_loop(graph: Graph, frame: Frame, frames: dict[str, Frame], library: Library) -> Graph:
    """Replaces the loop of `frame` (whose inner loops are functional already) by one While node."""
    nodes = graph.nodes
    where = f"while loop frame {_frame_name(frame)}"
    members = {name for name in nodes if frames[name] == frame}
    loop_conds = [name for name in nodes if name in members and nodes[name].op == "LoopCond"]
    if len(loop_conds) != 1:
        raise InvalidGraph(f"cannot functionalize {where}: it has {len(loop_conds)} LoopCond nodes, not one")
    loop_cond = nodes[loop_conds[0]]
    enters = [node for name, node in nodes.items() if name in members and node.op == "Enter"]
    invariants = [e for e in enters if e.attrs["is_constant"]]
    variables = [_variable(nodes, members, enter, loop_cond, where) for enter in enters if enter not in invariants]
    exits = {v.exit.name: i for i, v in enumerate(variables) if v.exit is not None}
    for name, node in nodes.items():
        if node.op == "Exit" and frames[node.inputs[0].node] == frame and name not in exits:
            raise InvalidGraph(f"cannot functionalize {where}: Exit {name!r} does not leave through a loop "
                               "variable's Switch")

    dtypes = [v.enter.attrs["T"] for v in variables] + [e.attrs["T"] for e in invariants]
    invariant_args = {Endpoint(e.name, 0): len(variables) + j for j, e in enumerate(invariants)}
    arg_nodes = {v.merge.name for v in variables} | {v.switch.name for v in variables} | {e.name for e in enters}

    cond_args = {Endpoint(v.merge.name, 0): i for i, v in enumerate(variables)} | invariant_args
    cond_members = closure(nodes, [loop_cond.inputs[0].node], lambda n: n in arg_nodes or n not in members)
    cond_body = cut(nodes, cond_members, cond_args, dtypes, [loop_cond.inputs[0]], f"the condition of {where}")

    body_args = {Endpoint(v.switch.name, 1): i for i, v in enumerate(variables)} | invariant_args
    body_rets = [v.next_iteration.inputs[0] for v in variables] + [Endpoint(e.name, 0) for e in invariants]
    starts = [e.node for e in body_rets] + [c for v in variables for c in v.next_iteration.control_inputs]
    body_members = closure(nodes, starts, lambda n: n in arg_nodes or n not in members)
    body = cut(nodes, body_members, body_args, dtypes, body_rets, f"the body of {where}")

    hint = frame[-1]
    cond_ref = library.add(f"{hint}_cond", functionalize_conds(cond_body, library), [np.dtype(np.bool_)])
    body_ref = library.add(f"{hint}_body", functionalize_conds(body, library), dtypes)
    name = unique_name(nodes, f"{hint}/While")
    used = cond_members | body_members
    control = [c for e in enters for c in e.control_inputs] + \
              [c for n, node in nodes.items() if n in used for c in node.control_inputs if frames[c] != frame]
    attrs = {"T": dtypes, "cond": cond_ref, "body": body_ref,
             "parallel_iterations": enters[0].attrs["parallel_iterations"]}
    loop = new_node(name, "While", [e.inputs[0] for e in [v.enter for v in variables] + invariants],
                    list(dict.fromkeys(control)), attrs, loop_cond.device)
    frames[name] = frame[:-1]
    return splice(graph, members | set(exits), loop, exits)


def _variable(nodes: dict[str, Node], members: set[str], enter: Node, loop_cond: Node, where: str) -> LoopVariable:
    """The Merge, Switch, NextIteration and Exit of the loop variable that `enter` starts."""
    readers = [n for n in members if any(e.node == enter.name for e in nodes[n].inputs)]
    merges = [nodes[n] for n in readers if nodes[n].op == "Merge"]
    if len(readers) != 1 or len(merges) != 1 or len(merges[0].inputs) != 2:
        raise InvalidGraph(f"cannot functionalize {where}: Enter {enter.name!r} must feed exactly one two-input "
                           f"Merge, but it feeds {sorted(readers)}")
    merge = merges[0]
    back = [e for e in merge.inputs if e.node != enter.name]
    next_iteration = nodes[back[0].node]
    if next_iteration.op != "NextIteration":
        raise InvalidGraph(f"cannot functionalize {where}: Merge {merge.name!r} must join Enter {enter.name!r} "
                           f"and a NextIteration, not {next_iteration.name!r} ({next_iteration.op})")
    switches = [nodes[n] for n in members if nodes[n].op == "Switch"
                and nodes[n].inputs == [Endpoint(merge.name, 0), Endpoint(loop_cond.name, 0)]]
    if len(switches) != 1:
        raise InvalidGraph(f"cannot functionalize {where}: Merge {merge.name!r} must feed exactly one Switch "
                           f"on LoopCond {loop_cond.name!r}, found {len(switches)}")
    switch = switches[0]
    exits = [n for n in nodes.values() if n.op == "Exit" and n.inputs[0] == Endpoint(switch.name, 0)]
    if len(exits) > 1:
        raise InvalidGraph(f"cannot functionalize {where}: Switch {switch.name!r} has {len(exits)} Exits")
    return LoopVariable(enter, merge, switch, next_iteration, exits[0] if exits else None)
