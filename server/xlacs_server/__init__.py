"""The xlacs daemon: GraphDef -> graph passes -> tf2xla-style lowering -> PJRT compile -> cache -> execute."""
import jax

# TF graphs carry int64 and float64 tensors; without x64 JAX would silently narrow them.
jax.config.update("jax_enable_x64", True)
