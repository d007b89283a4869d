"""The xlacs daemon: GraphDef -> graph passes -> tf2xla-style lowering -> PJRT compile -> cache -> execute."""
import jax
import jaxlib

from xlacs_server import jax_versions

# First: the daemon's modules import jax's private APIs, which another jax may lack.
jax_versions.check(jax.__version__, jaxlib.__version__)

# TF graphs carry int64 and float64 tensors; without x64 JAX would silently narrow them.
jax.config.update("jax_enable_x64", True)
