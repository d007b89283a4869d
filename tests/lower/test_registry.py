"""The registry: coverage, the generated ops page, duplicate registrations, ListOps."""
import importlib.util
import pathlib

import pytest

import xlacs_server.service  # noqa: F401  (registers every lowering)
from xlacs_server.lower import coverage, registry

ROOT = pathlib.Path(__file__).resolve().parents[2]


def gen_ops_doc():
    spec = importlib.util.spec_from_file_location("gen_ops_doc", ROOT / "scripts" / "gen_ops_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_at_least_300_ops_and_every_seed_op_covered_or_excluded():
    assert len({l.op for l in registry.registrations()}) >= 300
    assert coverage.missing_seed_ops() == []


def test_ops_doc_is_fresh():
    assert (ROOT / "docs" / "ops.md").read_text() == gen_ops_doc().render(), "run scripts/gen_ops_doc.py"


def test_incompatible_duplicate_registration_raises():
    with pytest.raises(registry.DuplicateRegistration, match="Relu"):
        registry.register_op("Relu")(lambda ctx, features, *, T: [features])


def test_platform_override_is_picked_for_its_platform_only():
    assert registry.lookup("DepthwiseConv2dNative", "cpu").platform == "cpu"
    assert registry.lookup("DepthwiseConv2dNative", "gpu").platform is None


def test_list_ops_over_grpc(client):
    ops = {o.op: o for o in client.ops()}
    assert len(ops) == len({l.op for l in registry.registrations()})
    assert list(ops["ConcatV2"].constant_inputs) == ["last input"]
    assert list(ops["Reshape"].constant_inputs) == ["shape"]
    assert "cpu" in ops["DepthwiseConv2dNative"].platform_overrides
