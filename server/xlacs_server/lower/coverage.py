"""Coverage of the lowering registry against TF 1.14's 228 XLA ops (the seed list), and the ops xlacs
leaves out on purpose, with the reason a user sees."""
from importlib import resources

from xlacs_server.lower import registry

SEED_OPS: tuple[str, ...] = tuple(resources.files(__package__).joinpath("data/seed_xla_ops.txt").read_text().split())

_OPTIMIZER = ("an optimizer update mutates training state; a stateless inference service never applies one "
              "(compile the forward graph, update weights on the client and send them as a new checkpoint)")

# Ops that make no sense in a stateless inference service: the reason is part of the UNIMPLEMENTED message.
EXCLUDED: dict[str, str] = {
    **{op: _OPTIMIZER for op in SEED_OPS if op.startswith("ResourceApply")},
}


def covered() -> set[str]:
    return {l.op for l in registry.registrations()}


def missing_seed_ops() -> list[str]:
    """Seed ops with neither a lowering nor a documented exclusion."""
    have = covered()
    return [op for op in SEED_OPS if op not in have and op not in EXCLUDED]
