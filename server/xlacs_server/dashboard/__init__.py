"""The dashboard. Imports rpc/ (its tokens), inference/ (its REST endpoints), models/ and the layers below.

FastAPI pages in the browser with JSON twins, Prometheus /metrics, health checks."""
from xlacs_server.dashboard.app import create_app

__all__ = ["create_app"]
