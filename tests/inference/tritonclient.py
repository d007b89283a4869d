"""Runs client scripts with NVIDIA's tritonclient, in the venv scripts/bootstrap makes for it (.venv-tritonclient:
tritonclient pins protobuf < 7, the daemon needs 7). A script gets its inputs as the dict `arrays` (numpy) and
`args` (JSON), and returns arrays and JSON the same way, by calling `reply(arrays=..., result=...)`."""
from __future__ import annotations

import json
import pathlib
import subprocess
import textwrap

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-tritonclient" / "bin" / "python"
TIMEOUT_S = 300

PRELUDE = '''
import json, sys
import numpy as np
ANSWER_S = 120  # a stream's wait for each answer: under TIMEOUT_S, so that a missing answer fails with what came
_work = sys.argv[1]
args = json.load(open(_work + "/args.json"))
arrays = dict(np.load(_work + "/in.npz")) if args.pop("_has_arrays") else {}
def reply(arrays=None, result=None):
    np.savez(_work + "/out.npz", **(arrays or {}))
    json.dump(result, open(_work + "/result.json", "w"))
'''


class ClientScriptFailed(AssertionError):
    """The script raised: its stderr says what tritonclient reported."""


def run(script: str, work_dir: pathlib.Path, arrays: dict[str, np.ndarray] | None = None, *,
        python: pathlib.Path = PYTHON, **args) -> tuple[dict[str, np.ndarray], object]:
    """(arrays, result) the script replied with, run by `python` (another client's venv).
    Raises ClientScriptFailed with the script's stderr if it fails."""
    source = prepare(script, work_dir, arrays, python, args)
    done = subprocess.run([str(python), str(source), str(work_dir)], capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise ClientScriptFailed(f"client script failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return replied(work_dir)


def prepare(script: str, work_dir: pathlib.Path, arrays: dict[str, np.ndarray] | None, python: pathlib.Path,
            args: dict) -> pathlib.Path:
    """The script file, with its args and arrays beside it in work_dir (its one argument)."""
    if not python.exists():
        raise RuntimeError(f"{python} is missing: run scripts/bootstrap test")
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "args.json").write_text(json.dumps({**args, "_has_arrays": bool(arrays)}))
    if arrays:
        np.savez(work_dir / "in.npz", **arrays)
    source = work_dir / "script.py"
    source.write_text(PRELUDE + textwrap.dedent(script))
    return source


def replied(work_dir: pathlib.Path) -> tuple[dict[str, np.ndarray], object]:
    """(arrays, result) a script that ran in work_dir replied with."""
    with np.load(work_dir / "out.npz") as out:
        return dict(out), json.loads((work_dir / "result.json").read_text())
