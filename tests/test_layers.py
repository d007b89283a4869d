"""The import contracts of pyproject.toml ([tool.importlinter]) hold: the daemon's layers, no import circles in it,
and the client below the daemon (docs/architecture.md draws them)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept():
    # This checkout's packages first: an installed copy of xlacs (an editable one of another checkout) is not checked.
    path = os.pathsep.join([str(ROOT / "client"), str(ROOT / "server"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    lint_imports = pathlib.Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint_imports), "--no-cache", str(ROOT / "pyproject.toml")],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True)
    broken = [line.removesuffix(" BROKEN") for line in run.stdout.splitlines() if line.endswith(" BROKEN")]
    assert run.returncode == 0, f"broken import contracts: {broken or run.stderr[-2000:]}\n{run.stdout[-6000:]}"
