"""The dashboard in the browser: FastAPI pages with JSON twins, Prometheus /metrics, health checks."""
from xlacs_server.dashboard.app import create_app

__all__ = ["create_app"]
