"""Stage 2: the compile unit. Imports graph/, lower/ and the top-level config/errors/tensor_sig only.

A request's GraphDef and signature become the graph the compiler takes: feeds and fetches checked against the graph,
resource variables bound as inputs, weights lifted to parameters."""
from xlacs_server.unit.compile_unit import CompileUnit, build

__all__ = ["CompileUnit", "build"]
