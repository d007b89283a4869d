"""A short run of scripts/load_test.py: no errors but the intended ones, memory flat once warm; and the docs'
limits table is the settings' defaults."""
import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_short_load_run_has_only_intended_errors_and_flat_memory():
    load_test = load_script("load_test")
    report = load_test.run(clients=3, seconds=15)
    assert report.unintended_count == 0, report.unintended
    for kind, (_, intended) in load_test.REQUESTS.items():
        assert report.statuses.get(kind, {}).get(intended), (kind, report.statuses)  # every kind was exercised
    assert report.rss_mib["max"] < report.rss_mib["start"] * 1.2, report.rss_mib


def test_docs_list_the_limits_with_their_defaults():
    load_test = load_script("load_test")
    text = (ROOT / "docs" / "security.md").read_text()
    assert load_test.write_section(text, "limits", load_test.limits_table()) == text, \
        "run scripts/load_test.py --write-docs"
