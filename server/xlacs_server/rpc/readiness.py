"""Readiness that tells the truth: while every slot of a gate is held by calls running past their limit (an
XLA compile or a program run in the daemon, which nothing can stop), the daemon is not ready; the gRPC health
service answers NOT_SERVING and /readyz 503, so a balancer sends calls elsewhere until a slot frees."""
import logging
import threading
import weakref

from grpc_health.v1 import health, health_pb2

log = logging.getLogger(__name__)

POLL_S = 1.0


def watch(gates, service, health_servicer: health.HealthServicer, names: tuple[str, ...]) -> None:
    """Starts a thread that keeps the health status of `names` and `service.unready` up to date, for as long
    as the service lives (a weak reference: the thread does not keep a stopped server's service alive)."""
    service_ref = weakref.ref(service)

    def loop() -> None:
        reported = ""
        while (current := service_ref()) is not None:
            why = gates.stuck()
            if why != reported:
                status = health_pb2.HealthCheckResponse.NOT_SERVING if why else health_pb2.HealthCheckResponse.SERVING
                for name in names:
                    health_servicer.set(name, status)  # ignored once the daemon drains for shutdown
                current.unready = why
                if why:
                    log.warning("not ready: %s", why)
                else:
                    log.info("ready again: a slot is free")
                reported = why
            del current  # hold no reference while waiting
            threading.Event().wait(POLL_S)
    threading.Thread(target=loop, daemon=True, name="readiness").start()
