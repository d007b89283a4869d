"""The dashboard's FastAPI app: server-rendered pages that refresh themselves, each with a JSON twin."""

import contextlib
import datetime
import math
import pathlib
import time
from typing import Annotated, Callable

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from xlacs_server import metrics, version
from xlacs_server.dashboard import auth, charts, models, views
from xlacs_server.dashboard.sampler import Sampler
from xlacs_server.inference import rest
from xlacs_server.tfserving import rest as tfserving_rest

HERE = pathlib.Path(__file__).parent

# Each page renders templates/<view>.html from the very model its JSON twin returns.
PAGES: list[tuple[str, str, Callable]] = [
    # page                           JSON twin                            view
    ("/",                            "/api/overview",                     views.overview),
    ("/ops",                         "/api/ops",                          views.ops),
    ("/cache",                       "/api/cache",                        views.cache),
    ("/executables",                 "/api/executables",                  views.executables),
    ("/executables/{key}",           "/api/executables/{key}",            views.executable),
    ("/errors",                      "/api/errors",                       views.errors),
    ("/models",                      "/api/models",                       views.served_models),
]
DOWNLOADS: list[tuple[str, Callable]] = [
    ("/api/executables/{key}/stablehlo",                                  views.stablehlo_text),
    ("/api/executables/{key}/hlo",                                        views.hlo_text),
    ("/api/executables/{key}/prepare/stablehlo",                          views.prepare_stablehlo_text),
]
NOT_CACHED = "No executable with this cache key is in the memory cache"
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
NAV = [("/", "Overview"), ("/ops", "Registered ops"), ("/cache", "Cache"), ("/executables", "Executables"),
       ("/errors", "Recent errors"), ("/models", "Models")]


def create_app(service, *, refresh_s: float = 2.0) -> FastAPI:
    """The dashboard of `service`. Pages refresh, and the cache tiers are sampled, every `refresh_s` seconds."""
    dash = views.Dashboard(service, Sampler(service, refresh_s))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        dash.sampler.start()
        try:
            yield
        finally:
            dash.sampler.stop()

    # No Swagger UI or ReDoc: they load their scripts from a CDN, and the daemon's machines are offline.
    app = FastAPI(title="xlacs dashboard", version=version.VERSION, lifespan=lifespan, docs_url=None,
                  redoc_url=None, description="What the xlacs daemon can compile, its cache, executables and errors.")
    app.state.dashboard = dash
    auth.protect(app, service.settings)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = _templates(refresh_s)
    for page_path, api_path, view in PAGES:
        keyed = "{key}" in api_path
        app.get(api_path, tags=["api"], responses={404: {"model": models.Problem}} if keyed else None)(view)
        app.get(page_path, tags=["pages"], response_class=HTMLResponse,
                responses={404: {"description": NOT_CACHED}} if keyed else None,
                )(_page(templates, view, page_path, api_path))
    # Spelled out: FastAPI would document a 404 model under the route's own media type, text/plain.
    problem = {"application/json": {"schema": models.Problem.model_json_schema()}}
    for path, view in DOWNLOADS:
        app.get(path, tags=["api"], response_class=PlainTextResponse,
                responses={404: {"description": NOT_CACHED, "content": problem}})(_download(view))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> Response:
        """A page's error is a page for a person; anything else gets FastAPI's JSON."""
        if "pages" not in getattr(request.scope.get("route"), "tags", ()):
            return await http_exception_handler(request, error)
        return templates.TemplateResponse(request, "error.html", {
            "status": error.status_code, "detail": error.detail, "rendered": time.time(), "section": None},
            status_code=error.status_code)

    registry = metrics.registry_for(service)

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    def prometheus() -> Response:
        """Prometheus text exposition."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.head("/healthz", include_in_schema=False)  # HEAD as GET without the body: for probes that ask it
    @app.get("/healthz", tags=["operations"])
    def healthz() -> models.Health:
        """The process answers."""
        return models.Health(status="ok")

    @app.head("/readyz", include_in_schema=False)
    @app.get("/readyz", tags=["operations"], responses={503: {"model": models.Health}})
    def readyz() -> models.Health:
        """Ready for requests: devices are present, the daemon is not draining for shutdown, and no gate has
        every slot stuck (rpc/readiness.py)."""
        why = service.unready()
        if why:
            return JSONResponse(models.Health(status=why).model_dump(), status_code=503)
        return models.Health(status="ready")

    endpoints = rest.Endpoints(service)
    app.include_router(rest.router(service, endpoints))  # the Open Inference Protocol: /v2/...
    app.include_router(tfserving_rest.router(  # TensorFlow Serving's REST API: /v1/...
        service, route_class=rest.answering_errors(service.counters), request_context=rest.RequestContext,
        read_body=endpoints.body, infer_threads=endpoints.infer_threads))

    return app


def _page(templates: Jinja2Templates, view: Callable, page_path: str, api_path: str) -> Callable:
    section = "/" + page_path.split("/")[1]  # the nav entry to highlight

    def page(request: Request, model: Annotated[BaseModel, Depends(view)]) -> HTMLResponse:
        api_url = api_path.format(**request.path_params) + (f"?{request.url.query}" if request.url.query else "")
        return templates.TemplateResponse(request, f"{view.__name__}.html", {
            "model": model, "rendered": time.time(), "api_url": api_url, "section": section})
    page.__name__ = f"{view.__name__}_page"
    page.__doc__ = f"The HTML page of {api_path}."
    return page


def _download(view: Callable) -> Callable:
    def download(named_text: Annotated[tuple[str, str], Depends(view)]) -> PlainTextResponse:
        name, text = named_text
        return PlainTextResponse(text, headers={"Content-Disposition": f'attachment; filename="{name}"'})
    download.__name__ = view.__name__
    download.__doc__ = view.__doc__
    return download


def _templates(refresh_s: float) -> Jinja2Templates:
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals.update(nav=NAV, refresh_s=refresh_s, version=version.VERSION,
                                 hit_rate_chart=charts.hit_rate_chart)
    templates.env.filters.update(bytes=_bytes, when=_when, duration=_duration, percent=_percent, per_s=_per_s)
    return templates


def _bytes(n: int | None) -> str:
    if n is None:
        return "–"
    exponent = min(int(math.log(max(n, 1), 1024)), len(BYTE_UNITS) - 1)
    return f"{n} B" if exponent == 0 else f"{n / 1024 ** exponent:.1f} {BYTE_UNITS[exponent]}"


def _when(unix: float | None) -> str:
    if not unix:
        return "never"
    return datetime.datetime.fromtimestamp(unix).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    return f"{days} d {h} h" if days else f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s" if m else f"{s} s"


def _percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction:.1%}"


def _per_s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}/s"
