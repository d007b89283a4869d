"""`xlacs serve`: start the daemon (gRPC and the HTTP dashboard) and stop it cleanly on SIGTERM/SIGINT."""
import logging
import signal
import threading

from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.rpc.server import create_server
from xlacs_server.service import CompilationService

log = logging.getLogger("xlacs")


def settings_from_args(args) -> Settings:
    host = port = None
    if args.server:
        host, _, port = args.server.rpartition(":")
        port = int(port)
    devices = tuple(d for d in args.devices.split(",") if d) if args.devices else None
    return Settings.from_env(host=host or None, port=port, http_port=args.http_port, devices=devices,
                             dump_graphs=args.dump_graphs, workers=args.workers, redis_url=args.redis_url,
                             cache_dir=args.cache_dir, cache_secret_file=args.cache_secret_file)


def serve(args) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_args(args)
    service = CompilationService(settings)
    server, port, health = create_server(service, f"{settings.host}:{settings.port}")
    app = create_app(service)
    http = HttpServer(app, settings.host, settings.http_port)
    server.start()
    http.start()
    log.info("xlacs serving gRPC on %s:%d and the dashboard on http://%s:%d; devices: %s", settings.host, port,
             settings.host, http.port, ", ".join(f"{d.name} ({d.kind})" for d in service.devices.all))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("shutting down: no new calls, finishing the ones in flight")
    health.enter_graceful_shutdown()
    app.state.dashboard.draining = True  # /readyz answers 503 while the calls in flight finish
    server.stop(grace=30).wait()
    http.stop()
    log.info("stopped")
