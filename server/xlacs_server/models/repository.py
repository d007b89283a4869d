"""The model repository (docs/model_repository.md): DIR/<model>/config.pbtxt and DIR/<model>/<version>/, Triton's
layout. `xlacs serve --model-repository DIR` loads every model in the background once the servers are up; the
protocol's load and unload calls (re)load or drop one without a restart. A model or version that fails to load is
UNAVAILABLE with the error as its reason and stops no other."""
from __future__ import annotations

import collections
import dataclasses
import logging
import pathlib
import threading
import time
from typing import TYPE_CHECKING

from xlacs_server.errors import InvalidRequest, NotFound, Unavailable, XlacsError
from xlacs_server.models import config as configs
from xlacs_server.models.model import READY, UNAVAILABLE, ServedModel

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.service import CompilationService

log = logging.getLogger(__name__)


@dataclasses.dataclass
class VersionStatus:
    name: str
    version: str  # "" for a model that has no version to show (its config failed, it is unloaded)
    state: str
    reason: str


class ModelRepository:
    def __init__(self, service: CompilationService, dynamic: DynamicExecutables):
        self._service = service
        self._dynamic = dynamic  # a model's feeds may have unknown dims (buckets/)
        path = service.settings.model_repository
        self.directory = pathlib.Path(path).expanduser() if path else None
        if self.directory is not None and not self.directory.is_dir():
            raise ValueError(f"model_repository {path!r} is not a directory: give the directory holding one "
                             "directory per model (docs/model_repository.md)")
        self._ready = threading.Event()  # set once the initial load ended: every model tried
        if self.directory is None:
            self._ready.set()
        self._models: dict[str, dict[str, ServedModel]] = {}  # served: name -> version -> model
        self._reasons: dict[str, str] = {}  # why a model that is not served is not: its error, or "unloaded"
        self._lock = threading.Lock()
        self._model_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._closed = False

    @property
    def ready(self) -> bool:
        """True once the initial load ended (every model tried, failed ones too)."""
        return self._ready.is_set()

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    # --- Loading ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Loads every model of the directory on a thread of its own; `ready` once each has been tried."""
        if self.directory is None:
            return
        threading.Thread(target=self._load_all, name="model-repository", daemon=True).start()

    def _load_all(self) -> None:
        start = time.perf_counter()
        names = self._names()
        log.info("model repository %s: loading %d model(s): %s", self.directory, len(names), ", ".join(names))
        for name in names:
            if self._closed:
                return
            with self._lock:
                called = name in self._models or name in self._reasons
            if called:  # a load or unload call came first: it stands
                continue
            try:
                self.load(name)
            except XlacsError:
                pass  # logged, and kept as the model's or version's reason
            except Exception:  # a bug of xlacs: the other models load still
                log.exception("model %r failed to load", name)
        statuses = self.index()
        log.info("model repository %s loaded in %.1f s: %d version(s) ready, %d unavailable", self.directory,
                 time.perf_counter() - start, sum(s.state == READY for s in statuses),
                 sum(s.state != READY for s in statuses))
        self._ready.set()

    def load(self, name: str, config_json: str = "") -> None:
        """(Re)loads DIR/<name> and returns once every version of its policy has been tried; `config_json` replaces
        config.pbtxt. Versions being reloaded keep serving until the new ones are ready, and stay if any fails.
        Raises the first version's error if one failed (it is UNAVAILABLE, others serve)."""
        model_dir = self._model_dir(name)
        with self._model_lock(name):
            log.info("loading model %r", name)
            try:
                config = configs.read(model_dir, config_json)
                available = sorted(int(p.name) for p in model_dir.iterdir()
                                   if p.is_dir() and p.name.isdigit() and int(p.name) > 0)
                chosen = configs.versions(config, available)
                if not chosen:
                    raise InvalidRequest(f"model {name!r} has no version directory: put the model in {model_dir}/1/")
            except Exception as e:
                with self._lock:
                    self._reasons[name] = str(e) or type(e).__name__
                log.warning("model %r failed to load: %s", name, e)
                raise
            loading = {str(v): ServedModel(self._service, self._dynamic, model_dir / str(v), config) for v in chosen}
            with self._lock:
                old = self._models.get(name, {})
                if not any(m.state == READY for m in old.values()):
                    self._models[name] = loading  # nothing served to keep meanwhile: show them LOADING
            errors = []
            for model in loading.values():
                try:
                    model.load()
                except Exception as e:
                    errors.append(e)
            keep_old = errors and any(m.state == READY for m in old.values())
            with self._lock:
                self._models[name] = old if keep_old else loading
                self._reasons.pop(name, None)
            for dropped in (loading if keep_old else old).values():
                dropped.unload(0.0 if keep_old else self._service.settings.shutdown_grace_s)
            if errors:
                raise errors[0]

    def unload(self, name: str) -> None:
        """Every version UNLOADING: new requests are refused, those in flight finish (up to shutdown_grace_s),
        then the model is gone (the index shows it unloaded)."""
        with self._lock:
            known = name in self._models
        if not known:
            self._model_dir(name)  # NotFound for a model that is not in the repository either
        with self._model_lock(name):
            with self._lock:
                versions = self._models.get(name, {})
            for model in versions.values():
                model.unload(self._service.settings.shutdown_grace_s)
            with self._lock:
                self._models.pop(name, None)
                self._reasons[name] = "unloaded"
            log.info("model %r unloaded", name)

    def close(self) -> None:
        """At shutdown: no more loads; the batchers fail what they queue."""
        self._closed = True
        with self._lock:
            models = [m for versions in self._models.values() for m in versions.values()]
        for model in models:
            model.unload(0.0)

    # --- Lookups ---------------------------------------------------------------------------------

    def index(self) -> list[VersionStatus]:
        """Every model directory's versions (and models served whose directory went), by name and version."""
        with self._lock:
            served = {name: list(versions.values()) for name, versions in self._models.items()}
            reasons = dict(self._reasons)
        statuses = []
        for name in sorted(set(self._names()) | set(served)):
            if name in served:
                statuses += [VersionStatus(name, m.version, m.state, m.reason)
                             for m in sorted(served[name], key=lambda m: int(m.version))]
            else:
                statuses.append(VersionStatus(name, "", UNAVAILABLE, reasons.get(name, "not loaded yet")))
        return statuses

    def model(self, name: str, version: str = "") -> ServedModel:
        """The served version (any state: its infer says why it is not READY); "" for the highest READY one."""
        with self._lock:
            versions = self._models.get(name)
            reason = self._reasons.get(name)
            names = sorted(self._models)
        if versions is None:
            if reason is None and name in self._names():
                reason = "not loaded yet"
            if reason is not None:
                raise Unavailable(f"model {name!r} is not served: {reason}")
            raise NotFound(f"no model {name!r}; the models served are {names or 'none'}")
        if not version:
            ready = [m for m in versions.values() if m.state == READY]
            if not ready:
                states = ", ".join(f"version {m.version} {m.state}{': ' + m.reason if m.reason else ''}"
                                   for m in versions.values())
                raise Unavailable(f"model {name!r} has no version ready ({states})")
            return max(ready, key=lambda m: int(m.version))
        model = versions.get(str(int(version)) if version.isdigit() else version)
        if model is None:
            raise NotFound(f"model {name!r} has no version {version!r}; its versions are "
                           f"{sorted(versions, key=int)}")
        return model

    def _names(self) -> list[str]:
        if self.directory is None:
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith("."))

    def _model_dir(self, name: str) -> pathlib.Path:
        """DIR/<name>, for a name that is one of its model directories (and so no path of a client's making)."""
        names = self._names()
        if name not in names:
            where = f"in the model repository {self.directory}" if self.directory else \
                "(the daemon has no model repository: start it with --model-repository DIR)"
            raise NotFound(f"no model {name!r} {where}; its models are {names or 'none'}")
        return self.directory / name

    def _model_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._model_locks[name]
