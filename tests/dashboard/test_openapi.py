"""Schemathesis against the live dashboard: every operation of its OpenAPI document, with generated requests."""
import hypothesis
import hypothesis.errors
import schemathesis
from schemathesis import GenerationMode

from xlacs_server.dashboard import app as dashboard_app

EXAMPLES = 15  # per operation and generation mode: a few hundred requests in all, some seconds


def test_every_operation_conforms_to_the_document(dashboard):
    # Schemathesis's own pytest loader (from_fixture) breaks on pytest 9.2, so the operations run in one test.
    schema = schemathesis.openapi.from_url(f"{dashboard.url}/openapi.json")
    failures, tested = {}, []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                                 suppress_health_check=list(hypothesis.HealthCheck))
            def check(case):
                case.call_and_validate(base_url=dashboard.url)
            try:
                check()
            except hypothesis.errors.Unsatisfiable:  # no invalid request exists for an operation without inputs
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as e:  # noqa: BLE001  (collect every failing operation, then report them together)
                failures[f"{operation.label} ({mode.value})"] = e
        tested.append(operation.label)
    assert len(tested) >= len(dashboard_app.PAGES) * 2 + len(dashboard_app.DOWNLOADS) + 3, tested
    assert not failures, "\n\n".join(f"{label}:\n{error}" for label, error in failures.items())


def test_every_page_has_a_json_twin_in_the_document(http):
    paths = http.get("/openapi.json").json()["paths"]
    for page, twin, _ in dashboard_app.PAGES:
        assert "text/html" in paths[page]["get"]["responses"]["200"]["content"]
        assert "application/json" in paths[twin]["get"]["responses"]["200"]["content"]


def test_every_operation_has_its_own_id(http):
    """Clients generated from the document name their calls by operationId: each is unique (GET routes that
    answer HEAD too list only their GET)."""
    paths = http.get("/openapi.json").json()["paths"]
    ids = [operation["operationId"] for methods in paths.values() for operation in methods.values()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert not any("head" in methods for methods in paths.values())
