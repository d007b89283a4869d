"""The daemon's service: the compilation service with the features built on it registered at start, the
executables of feeds with unknown dims (buckets/) and the model repository (models/). The front ends (rpc/,
inference/, dashboard/) take this one; the service itself knows no feature."""
from __future__ import annotations

from xlacs_server.buckets.dynamic import DynamicExecutables
from xlacs_server.config import Settings
from xlacs_server.models.repository import ModelRepository
from xlacs_server.service import CompilationService


class Daemon(CompilationService):
    def __init__(self, settings: Settings):
        super().__init__(settings)
        self.dynamic = DynamicExecutables(self)  # executables of feeds with unknown dims (buckets/)
        self.models = ModelRepository(self, self.dynamic)  # the model repository's served models (empty without one)

    def unready(self, *, models: bool = False) -> str:
        """Why the daemon takes no calls now, "" when it takes them (CompilationService.unready); with `models`,
        also the model repository's initial load not ended (the Open Inference Protocol's readiness on both
        transports). Every probe asks it (rpc/readiness.py)."""
        return super().unready() or ("the model repository is loading" if models and not self.models.ready else "")

    def close(self, tier_up_s: float = 0.0) -> None:
        """At shutdown: the served models first, then the service's parts (CompilationService.close)."""
        self.models.close()
        super().close(tier_up_s)
