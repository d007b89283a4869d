"""Readiness that tells the truth, on the gRPC health service as on /readyz and /v2/health/ready (all of them ask
`Daemon.unready`, daemon.py). While every slot of a gate is held by calls running past their limit (an XLA
compile or a program run in the daemon, which nothing can stop), the daemon is not ready: the health service
answers NOT_SERVING, so a balancer sends calls elsewhere until a slot frees. The Open Inference Protocol's service
and the whole server ("") are not ready either until the model repository's initial load has ended, as
/v2/health/ready; the Compiler service takes calls meanwhile."""
import logging
import threading
import weakref

from grpc_health.v1 import health, health_pb2

log = logging.getLogger(__name__)
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING

POLL_S = 1.0


def watch(service, health_servicer: health.HealthServicer, names: dict[str, bool]) -> None:
    """Sets the health status of each service of `names` (name -> whether it waits for the model repository), and
    starts a thread that keeps them up to date, and logs when every slot of a gate gets stuck and when one frees,
    for as long as the service lives (a weak reference: the thread does not keep a stopped server's service
    alive)."""
    service_ref = weakref.ref(service)

    def update(current, reported: dict[str, str], stuck: str) -> tuple[dict[str, str], str]:
        """The reasons now by service name, each change set on the health service, and the gates' reason."""
        why = {name: current.unready(models=models) for name, models in names.items()}
        for name, reason in why.items():
            if reason != reported.get(name):
                health_servicer.set(name, NOT_SERVING if reason else SERVING)  # ignored once the daemon drains
        now = current.gates.stuck()
        if now != stuck:
            if now:
                log.warning("not ready: %s", now)
            else:
                log.info("ready again: a slot is free")
        return why, now

    def loop(reported: dict[str, str], stuck: str) -> None:
        while (current := service_ref()) is not None:
            models = current.models  # which holds the service too, for POLL_S at most
            del current
            # While the model repository loads, wake as soon as its initial load ends, to say so at once.
            (threading.Event().wait if models.ready else models.wait_ready)(POLL_S)
            del models
            if (current := service_ref()) is not None:
                reported, stuck = update(current, reported, stuck)
            del current

    threading.Thread(target=loop, args=update(service, {}, ""), daemon=True, name="readiness").start()
