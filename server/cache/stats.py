"""Per-tier cache counters, as GetStats, the dashboard and /metrics report them."""
import dataclasses


@dataclasses.dataclass
class TierStats:
    tier: str
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    errors: int = 0
    entries: int = 0
    bytes: int = 0
    compile_ms_saved: float = 0.0
