"""Coverage of the lowering registry against TF 1.14's 228 XLA ops (the seed list)."""
from importlib import resources

from xlacs_server.lower import registry

SEED_OPS: tuple[str, ...] = tuple(resources.files(__package__).joinpath("data/seed_xla_ops.txt").read_text().split())


def covered() -> set[str]:
    return {l.op for l in registry.registrations()}


def missing_seed_ops() -> list[str]:
    """Seed ops without a lowering."""
    have = covered()
    return [op for op in SEED_OPS if op not in have]
