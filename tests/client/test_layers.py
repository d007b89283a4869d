"""The client's import layers: pyproject.toml's contract "client-layers", checked by import-linter on the xlacs this
suite imports. Each module of xlacs imports only the layers below it (TYPE_CHECKING and function-level imports
count), so the client has no import circle and no upward import."""
import os
import pathlib
import shutil
import subprocess
import sys

import xlacs
import xlacs_server

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
LINT_IMPORTS = pathlib.Path(sys.executable).parent / "lint-imports"  # the venv's, beside its python
CONTRACT = "client-layers"


def lint_imports(client_root: pathlib.Path, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """lint-imports on the client contract, reading xlacs from `client_root` and this suite's xlacs_server (the
    contract's graph holds both root packages)."""
    server_root = pathlib.Path(xlacs_server.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(client_root), str(server_root)])}
    return subprocess.run([LINT_IMPORTS, PYPROJECT, "--contract", CONTRACT, "--no-cache", "--no-logo"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_client_keeps_its_layers(tmp_path):
    result = lint_imports(pathlib.Path(xlacs.__file__).resolve().parents[1], tmp_path)
    assert result.returncode == 0, f"import-linter finds contract {CONTRACT!r} broken:\n{result.stdout}{result.stderr}"


def test_an_upward_type_checking_import_breaks_the_contract(tmp_path):
    """The check sees what it must: a low module that imports the Client, even for type hints only, is named."""
    copy = tmp_path / "client" / "xlacs"
    shutil.copytree(pathlib.Path(xlacs.__file__).resolve().parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "dtypes.py", "a") as f:
        f.write("\nimport typing\nif typing.TYPE_CHECKING:\n    from xlacs.client import Client\n")
    result = lint_imports(copy.parent, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "client layers BROKEN" in result.stdout
    assert "xlacs.dtypes is not allowed to import xlacs.client" in result.stdout
