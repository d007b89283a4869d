"""The model repository (docs/model_repository.md): DIR/<model>/config.pbtxt and DIR/<model>/<version>/, Triton's
layout; or TensorFlow Serving's models (docs/tf_serving.md), each BASE/<version>/saved_model.pb, as its
ModelServerConfig lists them (server_config.py) with their version labels. `xlacs serve --model-repository DIR` (or
--model-config-file, --model-base-path) loads every model in the background once the servers are up; the protocol's
load and unload calls (re)load or drop one without a restart, and a new ModelServerConfig (TF Serving's
HandleReloadConfigRequest) adds, removes and reloads TF Serving's models. A model or version that fails to load is
UNAVAILABLE with the error as its reason and stops no other."""
from __future__ import annotations

import collections
import dataclasses
import logging
import pathlib
import threading
import time
from typing import TYPE_CHECKING

from xlacs_server.errors import (FailedPrecondition, InvalidRequest, ModelsNotAvailable, NotFound, Unavailable,
                                 XlacsError)
from xlacs_server.models import config as configs
from xlacs_server.models import server_config
from xlacs_server.models.model import READY, UNAVAILABLE, ServedModel
from xlacs_server.models.tfs import model_server_config_pb2
from xlacs_server.models.v2 import model_config_pb2

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.config import Settings
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
        settings = service.settings
        self._models: dict[str, dict[str, ServedModel]] = {}  # served: name -> version -> model
        self._reasons: dict[str, str] = {}  # why a model that is not served is not: its error, or "unloaded"
        # What each model's versions were loaded from (its directory and config): a reload keeps the versions of a
        # model whose source did not change.
        self._loaded_from: dict[str, tuple[pathlib.Path, model_config_pb2.ModelConfig]] = {}
        self._lock = threading.Lock()
        self._model_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._reload_lock = threading.Lock()  # one reload of the model server config at a time
        self._closed = False
        self._ready = threading.Event()  # set once the initial load ended: every model tried
        _check_sources(settings)
        # Where the models are, for people: the directory, the model server config's file, or the base path.
        self.source = settings.model_repository or settings.model_config_file or settings.model_base_path
        path = settings.model_repository
        self.directory = pathlib.Path(path).expanduser() if path else None
        if self.directory is not None and not self.directory.is_dir():
            raise ValueError(f"model_repository {path!r} is not a directory: give the directory holding one "
                             "directory per model (docs/model_repository.md)")
        # TF Serving's models by name, as the model server config lists them; None without one.
        self._declared: dict[str, server_config.Declared] | None = None
        if settings.model_config_file or settings.model_base_path:
            config = server_config.read_file(settings.model_config_file) if settings.model_config_file else \
                server_config.single(settings.model_name, settings.model_base_path)
            declared = server_config.declared(config, settings.model_config_file or "--model-base-path")
            self._check_labels(declared)  # none is available yet: TF Serving's start refuses labels too
            self._declared = declared
        if self.directory is None and self._declared is None:
            self._ready.set()

    @property
    def ready(self) -> bool:
        """True once the initial load ended (every model tried, failed ones too)."""
        return self._ready.is_set()

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    # --- Loading ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Loads every model on a thread of its own; `ready` once each has been tried."""
        if self._ready.is_set():
            return
        threading.Thread(target=self._load_all, name="model-repository", daemon=True).start()

    def _load_all(self) -> None:
        start = time.perf_counter()
        names = self._names()
        log.info("model repository %s: loading %d model(s): %s", self.source, len(names), ", ".join(names))
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
        log.info("model repository %s loaded in %.1f s: %d version(s) ready, %d unavailable", self.source,
                 time.perf_counter() - start, sum(s.state == READY for s in statuses),
                 sum(s.state != READY for s in statuses))
        self._ready.set()

    def load(self, name: str, config_json: str = "") -> None:
        """(Re)loads the model <name> (DIR/<name>, or a TF Serving model's base path) and returns once every version
        of its policy has been tried; `config_json` replaces its config.pbtxt. Versions being reloaded keep serving
        until the new ones are ready, and stay if any fails. Raises the first version's error if one failed (it is
        UNAVAILABLE, others serve)."""
        failures = self._load(name, config_json)
        if failures:
            raise failures[0][1]

    def _load(self, name: str, config_json: str = "", *, reuse: bool = False) -> list[tuple[str, Exception]]:
        """load(), answering each version that failed with its error. With `reuse`, a version that serves already
        is kept as it is, without a load, where the model's files and config (its version policy aside) are those
        it was loaded from: its requests in flight and to come are not disturbed."""
        self._model_dir(name)  # NotFound for a name that is no model (before any lock is made for it)
        with self._model_lock(name):
            log.info("loading model %r", name)
            try:
                model_dir, config, chosen = self._read(name, config_json)
            except Exception as e:
                with self._lock:
                    self._reasons[name] = str(e) or type(e).__name__
                log.warning("model %r failed to load: %s", name, e)
                raise
            with self._lock:
                old = self._models.get(name, {})
                kept = {v: m for v, m in old.items() if m.state == READY} if reuse and _same_source(
                    self._loaded_from.get(name), (model_dir, config)) else {}
            loading = {str(v): kept.get(str(v)) or ServedModel(self._service, self._dynamic, model_dir / str(v), config)
                       for v in chosen}
            fresh = [m for v, m in loading.items() if v not in kept]
            with self._lock:
                if not any(m.state == READY for m in old.values()):
                    self._models[name] = loading  # nothing served to keep meanwhile: show them LOADING
            failures = []
            for model in fresh:
                try:
                    model.load()
                except Exception as e:
                    failures.append((model.version, e))
            keep_old = failures and any(m.state == READY for m in old.values())
            with self._lock:
                self._models[name] = old if keep_old else loading
                self._reasons.pop(name, None)
                if not keep_old:
                    self._loaded_from[name] = (model_dir, config)
                    for version in kept.keys() & loading.keys():  # the policy, the one thing that may have changed
                        loading[version].config.version_policy.CopyFrom(config.version_policy)
            dropped = fresh if keep_old else [m for m in old.values() if m is not loading.get(m.version)]
            for model in dropped:
                model.unload(0.0 if keep_old else self._service.settings.shutdown_grace_s)
            return failures

    def _read(self, name: str, config_json: str) -> tuple[pathlib.Path, model_config_pb2.ModelConfig, list[int]]:
        """The model's directory (DIR/<name>, or a TF Serving model's base path), config and the versions its
        policy serves."""
        with self._lock:
            declared = self._declared
        if declared is None:
            model_dir = self._model_dir(name)
            config = configs.read(model_dir, config_json)
            chosen = configs.versions(config, _versions(model_dir, first=1))
            if not chosen:
                raise InvalidRequest(f"model {name!r} has no version directory: put the model in {model_dir}/1/")
            return model_dir, config, chosen
        if name not in declared:
            self._model_dir(name)  # NotFound: a reload took the model out
        model = declared[name]
        if not model.base_path.is_dir():
            raise InvalidRequest(f"Could not find base path {model.base_path} for servable {name}")
        config = server_config.model_config(model, config_json)
        return model.base_path, config, server_config.versions(model, _versions(model.base_path, first=0))

    def unload(self, name: str) -> None:
        """Every version UNLOADING: new requests are refused, those in flight finish (up to shutdown_grace_s),
        then the model is gone (the index shows it unloaded)."""
        with self._lock:
            known = name in self._models
        if not known:
            self._model_dir(name)  # NotFound for a model that is not in the repository either
        with self._model_lock(name):
            self._unload_versions(name)
            with self._lock:
                self._models.pop(name, None)
                self._reasons[name] = "unloaded"
            log.info("model %r unloaded", name)

    def _unload_versions(self, name: str) -> None:
        """Every version of `name` unloaded (in-flight requests finish, up to shutdown_grace_s); the caller holds
        the model's lock."""
        with self._lock:
            versions = self._models.get(name, {})
        for model in versions.values():
            model.unload(self._service.settings.shutdown_grace_s)

    # --- TF Serving's model server config --------------------------------------------------------

    def reconfigure(self, config: model_server_config_pb2.ModelServerConfig) -> None:
        """TF Serving's ReloadConfig: serves the models of `config` (a ModelServerConfig) and returns once each was
        tried. Labels are checked first, as TF Serving checks them, and nothing changes if one is refused; then a
        model no longer listed is unloaded (its requests in flight finish, up to shutdown_grace_s), a new one is
        loaded, and every other is read again: a version that stays serves on untouched, a version its policy (or
        a new version directory) brings is loaded, and a changed base path or config loads it all again. One reload
        at a time, after the initial load. ModelsNotAvailable lists the versions that failed; the config stands."""
        if self._declared is None:
            how = f"it serves the model repository {self.directory} (Triton's layout: reload a model with " \
                  "RepositoryModelLoad)" if self.directory else "it serves no models"
            raise FailedPrecondition("HandleReloadConfigRequest takes a model server config only on a daemon "
                                     "started with TF Serving's models (xlacs serve --model-config-file PATH, or "
                                     f"--model-base-path BASE); {how}")
        if config.WhichOneof("config") != "model_config_list":
            raise InvalidRequest("ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                                 "ModelConfigList is currently supported")
        models = server_config.declared(config, "the reload's config")
        with self._reload_lock:
            self._ready.wait()
            self._check_labels(models)
            with self._lock:
                old, self._declared = self._declared, models
            for name in old.keys() - models.keys():
                self._drop(name)
            failures = []
            for name in models:
                try:
                    failures += [(name, version, e) for version, e in self._load(name, reuse=True)]
                except Exception as e:
                    failures.append((name, "", e))
            log.info("model server config reloaded: %d model(s) (%s)%s", len(models), ", ".join(models),
                     f"; {len(failures)} failed to load" if failures else "")
        if failures:
            def entry(name, version, error):
                code = error.code.name if isinstance(error, XlacsError) else "UNKNOWN"
                servable = f"name: {name} version: {version}" if version else f"name: {name}"
                return f"{{{{{servable}}} due to error: {code}: {error}}}, "
            raise ModelsNotAvailable(f"{len({name for name, _, _ in failures})} model(s) did not become available: {{"
                                     + "".join(entry(*failure) for failure in failures) + "}")

    def labels(self, name: str) -> dict[str, int]:
        """The version labels of a TF Serving model (label -> version); none for any other."""
        with self._lock:
            model = (self._declared or {}).get(name)
        return dict(model.labels) if model is not None else {}

    def _check_labels(self, models: dict[str, server_config.Declared]) -> None:
        """TF Serving's UpdateModelVersionLabelMap: a label names a version that serves (READY), but with
        allow_version_labels_for_unavailable_models a label that is new, or that names the same version as
        before, may name any."""
        allow = self._service.settings.allow_version_labels_for_unavailable_models
        with self._lock:
            current = {name: model.labels for name, model in (self._declared or {}).items()}
            serving = {name: {v for v, m in versions.items() if m.state == READY}
                       for name, versions in self._models.items()}
        for model in models.values():
            for label, version in sorted(model.labels.items()):
                if allow and current.get(model.name, {}).get(label, version) == version:
                    continue
                if str(version) not in serving.get(model.name, ()):
                    raise FailedPrecondition(
                        f"Request to assign label to version {version} of model {model.name}, which is not "
                        "currently available for inference (a label names a version that serves; with "
                        "--allow-version-labels-for-unavailable-models, a new label may name one not loaded yet)")

    def _drop(self, name: str) -> None:
        """A model a reload took out: unloaded as unload() does, then forgotten (NotFound, as if never served)."""
        with self._model_lock(name):
            self._unload_versions(name)
            with self._lock:
                self._models.pop(name, None)
                self._reasons.pop(name, None)
                self._loaded_from.pop(name, None)
            log.info("model %r unloaded: the model server config no longer lists it", name)

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
        with self._lock:
            declared = self._declared
        if declared is not None:
            return sorted(declared)
        if self.directory is None:
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith("."))

    def _model_dir(self, name: str) -> pathlib.Path:
        """DIR/<name>, for a name that is one of its model directories (and so no path of a client's making), or
        the base path of a TF Serving model the config lists."""
        with self._lock:
            declared = self._declared
        names = self._names()
        if name not in names:
            where = f"in the model repository {self.directory}" if self.directory else \
                f"in the model server config {self.source}" if declared is not None else \
                "(the daemon has no model repository: start it with --model-repository DIR, or with TF Serving's " \
                "models: --model-config-file PATH)"
            raise NotFound(f"no model {name!r} {where}; its models are {names or 'none'}")
        return declared[name].base_path if declared is not None else self.directory / name

    def _model_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._model_locks[name]


def _check_sources(settings: Settings) -> None:
    """ValueError for settings that name models twice over: a daemon serves a Triton repository or TF Serving's
    models, and these from a models.config or one base path."""
    tf_serving = settings.model_config_file or settings.model_base_path
    if settings.model_repository and tf_serving:
        raise ValueError("--model-repository and --model-config-file / --model-base-path are exclusive: a daemon "
                         "serves a model repository (Triton's layout) or TF Serving's models, not both")
    if settings.model_config_file and (settings.model_base_path or settings.model_name):
        raise ValueError("--model-config-file and --model-base-path / --model-name are exclusive (TF Serving ignores "
                         "--model_base_path and --model_name beside --model_config_file): list the model in the "
                         "config file")
    if settings.model_name and not settings.model_base_path:
        raise ValueError("--model-name names the model of --model-base-path: give its base path too")


def _versions(model_dir: pathlib.Path, first: int) -> list[int]:
    """The numbers of the version directories of `model_dir`, ascending: those named by an integer of at least
    `first` (Triton's versions start at 1, TF Serving's at 0)."""
    return sorted(int(p.name) for p in model_dir.iterdir()
                  if p.is_dir() and p.name.isdigit() and int(p.name) >= first and str(int(p.name)) == p.name)


def _same_source(loaded: tuple[pathlib.Path, model_config_pb2.ModelConfig] | None,
                 now: tuple[pathlib.Path, model_config_pb2.ModelConfig]) -> bool:
    """Whether versions loaded from `loaded` (directory, config) are what `now` would load: the same directory and
    config, whose version policy picks versions but changes none."""
    if loaded is None or loaded[0] != now[0]:
        return False
    before, after = model_config_pb2.ModelConfig(), model_config_pb2.ModelConfig()
    before.CopyFrom(loaded[1])
    after.CopyFrom(now[1])
    before.ClearField("version_policy")
    after.ClearField("version_policy")
    return before == after
