"""Stage 1: GraphDef bytes -> Graph, the IR every later stage reads. Imports the top-level config/errors only."""
