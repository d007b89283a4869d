"""`xlacs serve`: start the daemon (gRPC and the HTTP dashboard) and stop it cleanly on SIGTERM/SIGINT."""
import gc
import logging
import os
import signal
import sys
import threading
import time

from xlacs_server import metrics
from xlacs_server.compile import xla_options
from xlacs_server.config import Settings
from xlacs_server.daemon import Daemon
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.errors import XlacsError
from xlacs_server.rpc.drain import Drain
from xlacs_server.rpc.server import create_server

log = logging.getLogger("xlacs")


def settings_from_args(args) -> Settings:
    host = port = None
    if args.server:
        host, _, port = args.server.rpartition(":")
        port = int(port)
    devices = tuple(d for d in args.devices.split(",") if d) if args.devices else None
    return Settings.from_env(host=host or None, port=port, http_port=args.http_port, devices=devices,
                             dump_graphs=args.dump_graphs, workers=args.workers, redis_url=args.redis_url,
                             cache_dir=args.cache_dir, cache_secret_file=args.cache_secret_file,
                             auth_tokens_file=args.auth_tokens_file, tls_cert_file=args.tls_cert_file,
                             tls_key_file=args.tls_key_file, tls_client_ca_file=args.tls_client_ca_file,
                             model_repository=args.model_repository, model_config_file=args.model_config_file,
                             model_name=args.model_name, model_base_path=args.model_base_path,
                             allow_version_labels_for_unavailable_models=(
                                 args.allow_version_labels_for_unavailable_models or None))


SIGNAL_POLL_S = 0.2  # how soon the main thread notices a signal another thread received


def with_malloc_tunables(tunables: str) -> None:
    """Re-executes this process, as it was started, with glibc's `tunables` (settings.malloc_tunables) added to
    GLIBC_TUNABLES if any is missing there (one named there already keeps its value): glibc reads them only when
    a process starts. The process re-executed has the setting empty: glibc may cut GLIBC_TUNABLES short in its
    environment as it parses it, and that must not look like tunables still missing."""
    present = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t]
    named = {t.split("=", 1)[0] for t in present}
    missing = [t for t in tunables.split(":") if t and t.split("=", 1)[0] not in named]
    if missing:
        os.environ["GLIBC_TUNABLES"] = ":".join(present + missing)
        os.environ["XLACS_MALLOC_TUNABLES"] = ""
        os.execv(sys.executable, sys.orig_argv)


def with_gpu_memory(fraction: float, environ=os.environ) -> None:
    """Has JAX preallocate `fraction` of each GPU's memory (settings.gpu_memory_fraction) unless the environment
    sets XLA_PYTHON_CLIENT_MEM_FRACTION itself: JAX reads it when its GPU backend starts, which this process has yet
    to do. PJRT's bytes_limit, and so each GPU's default budget (execute/device_budget.py), follows from it."""
    if not 0 < fraction <= 1:
        raise ValueError(f"gpu_memory_fraction={fraction} is not a share of a GPU's memory in (0, 1] "
                         "(XLACS_GPU_MEMORY_FRACTION)")
    environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{fraction:g}")


def serve(args) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Handlers first: a SIGTERM that arrives while JAX starts stops the daemon cleanly once it is up.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    settings = settings_from_args(args)
    with_malloc_tunables(settings.malloc_tunables)
    try:
        with_gpu_memory(settings.gpu_memory_fraction)
        xla_options.check_xla_flags()  # before this process starts XLA, which aborts on a bad flag
        service = Daemon(settings)
        drain = Drain()
        server, port, health = create_server(service, f"{settings.host}:{settings.port}", drain)
    except (XlacsError, ValueError, OSError) as e:  # e.g. an absent device, a TLS file: say what, no traceback
        raise SystemExit(f"xlacs serve: {e}") from None
    # What start made (modules, JAX's backends, the lowering registry) lives as long as the daemon: frozen, it is
    # out of the collector's way, and a compile's full collections scan only what the compile made (0.1-0.2 s
    # less CPU time per cold compile of a Keras CNN; docs/performance.md, Cold compile).
    gc.collect()
    gc.freeze()
    app = create_app(service)
    http = HttpServer(app, settings.host, settings.http_port)
    server.start()
    http.start()
    log.info("xlacs serving gRPC on %s:%d and the dashboard on http://%s:%d; devices: %s", settings.host, port,
             settings.host, http.port, ", ".join(f"{d.name} ({d.kind})" for d in service.devices.all))
    service.models.start()  # in the background: the servers answer meanwhile, ready once every model was tried
    # Timed waits: the kernel may hand SIGTERM to any of the daemon's threads, and Python runs the handler only when
    # the main thread next runs bytecode; an untimed wait would sleep through it (a SIGTERM lost this way in CI).
    while not stop.wait(SIGNAL_POLL_S):
        pass
    log.info("shutting down: no new calls; %d call(s) in flight get up to %g s to finish",
             metrics.calls_in_flight(), settings.shutdown_grace_s)
    deadline = time.monotonic() + settings.shutdown_grace_s  # for the calls, then the pending tier-ups and stores
    # /readyz, /v2/health/ready and ServerReady answer not ready while the calls finish: set before the gRPC health
    # service says NOT_SERVING, so that no probe answers ready after another has said not (a CI run read /readyz
    # between the two).
    service.draining = True
    health.enter_graceful_shutdown()
    drain.close()
    # Sessions end now (no new one can start): their calls stay open otherwise, and the drain would wait for them
    # to its deadline. An Execute in flight keeps the regions it uses mapped until it is done.
    service.shared_memory.close_all()
    if not drain.stop(server, settings.shutdown_grace_s):
        cut = metrics.calls_in_flight()
        if cut:
            log.warning("%d call(s) still running after %g s were cancelled", cut, settings.shutdown_grace_s)
    http.stop()
    service.close(tier_up_s=max(0.0, deadline - time.monotonic()))
    log.info("stopped")
    if metrics.calls_in_flight():
        # The work of cancelled calls still runs, on threads that would hold the interpreter's exit (it joins
        # them) past any deadline: leave without waiting for them. Execution workers exit with the daemon.
        logging.shutdown()
        os._exit(0)

