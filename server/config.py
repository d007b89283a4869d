"""Settings, read once at start from flags and XLACS_* environment variables into a frozen object."""
from __future__ import annotations

import dataclasses
import os

GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 50051
    http_port: int = 8080
    devices: tuple[str, ...] = ()  # empty: every device PJRT offers
    workers: int = 16
    # gRPC message limit. Frozen ResNet50 is ~100 MB; graphs up to this size compile in one message.
    max_message_bytes: int = 2 * GIB - 1
    l1_max_entries: int = 256
    l1_max_bytes: int = 4 * GIB
    max_tensor_elements: int = 1 << 31
    # Weights become parameters bound at Execute: float constants of at least lift_min_float_elements
    # elements, and any constant of at least lift_threshold_bytes (0 keeps every constant in the program).
    lift_threshold_bytes: int = 64 << 10
    lift_min_float_elements: int = 16
    max_loaded: int = 1024  # executable ids (program + weights bindings) kept loaded, LRU
    dump_graphs: str = ""  # a directory: the graph after each pass, as pbtxt

    @classmethod
    def from_env(cls, environ=os.environ, **overrides) -> "Settings":
        """Defaults, then XLACS_<FIELD> variables, then explicit (flag) overrides that are not None."""
        values = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(f"XLACS_{field.name.upper()}")
            if raw is not None:
                values[field.name] = _parse(field, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _parse(field: dataclasses.Field, raw: str):
    if field.type in ("int", int):
        return int(raw)
    if field.type.startswith("tuple"):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    return raw
