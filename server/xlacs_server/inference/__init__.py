"""The Open Inference Protocol. Imports models/ and the top-level config/errors/version only.

KServe v2 over HTTP/REST and gRPC: served models' health, metadata and inference. The daemon (daemon.py) is handed
in."""
from xlacs_server.errors import NotFound

# Triton's extensions xlacs offers, as both transports' server metadata lists them.
EXTENSIONS = ("binary_tensor_data", "model_repository", "model_configuration", "statistics")


def statistics_of(models, name: str = "", version: str = "") -> list[dict]:
    """Triton's statistics (ModelStatistics as JSON) of every served version of `models` (a ModelRepository), of
    model `name`'s, or of one version: what both transports' statistics calls answer."""
    if version:
        return [models.model(name, version).statistics.snapshot()]
    served = [s for s in models.index() if s.version and (not name or s.name == name)]
    if name and not served:
        models.model(name)  # NotFound or Unavailable, saying why it has no version
    snapshots = []
    for entry in served:
        try:
            snapshots.append(models.model(entry.name, entry.version).statistics.snapshot())
        except NotFound:  # unloaded since the index was read
            continue
    return snapshots
