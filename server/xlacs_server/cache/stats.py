"""Per-tier cache counters, as GetStats, the dashboard and /metrics report them."""
import dataclasses
import threading

_lock = threading.Lock()


@dataclasses.dataclass
class TierStats:
    tier: str
    hits: int = 0
    misses: int = 0  # lookups that found nothing usable, rejected entries and failed lookups included
    evictions: int = 0
    errors: int = 0  # failures of the tier's backend: Redis unreachable, an I/O error
    entries: int = 0
    bytes: int = 0
    compile_ms_saved: float = 0.0
    rejected: int = 0  # entries refused by their integrity check (also counted in misses)
    skipped: int = 0  # calls that did not wait on a failing backend (Redis' circuit breaker is open)

    def add(self, **deltas) -> None:
        """Adds to counters; requests on many threads count at once, and `+=` alone could lose some."""
        with _lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)
