"""Stage 1: GraphDef bytes -> Graph, the IR every later stage reads."""
