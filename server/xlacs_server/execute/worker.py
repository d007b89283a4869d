"""An execution worker: a child process that runs programs for the daemon, so that a program that never ends
(a While whose condition stays true) or crashes natively can be killed and replaced without the daemon.

It serves one device. Requests and replies are frames (frames.py) on a pipe:
- `run` {id, inputs}: the program's outputs, or {missing: true} if the worker has not loaded `id`;
- `load` {id, weights}: the serialized executable and its weights; kept, least recently used first out.
The worker exits when its pipe closes or its parent goes away.
"""
from __future__ import annotations

import collections
import os
import threading
import time

import jax
import numpy as np

from xlacs_server.execute import frames
from xlacs_server.execute.program import Program

MAX_PROGRAMS = 32  # programs (with their weights) a worker keeps loaded
PARENT_POLL_S = 1.0


def main(connection, platform: str, device_index: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    # The daemon preallocated its share of the GPU (gpu_memory_fraction): a worker on the same GPU allocates as it goes.
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    device = jax.devices(platform)[device_index]
    programs: collections.OrderedDict[str, tuple[Program, list[jax.Array]]] = collections.OrderedDict()
    while True:
        try:
            header, buffers = frames.decode(connection.recv_bytes())
        except EOFError:
            return
        try:
            if header["op"] == "load":
                weights = jax.device_put(frames.arrays(header["weights"], buffers[1:]), device)
                programs[header["id"]] = (Program.deserialize(bytes(buffers[0]), device), weights)
                while len(programs) > MAX_PROGRAMS:
                    programs.popitem(last=False)
                reply = frames.encode({"ok": True})
            elif header["id"] not in programs:
                reply = frames.encode({"ok": False, "missing": True})
            else:
                programs.move_to_end(header["id"])
                program, weights = programs[header["id"]]
                inputs = jax.device_put(frames.arrays(header["inputs"], buffers), device)
                outputs = [np.asarray(out) for out in program(*inputs, *weights)]
                reply = frames.encode({"ok": True, "outputs": frames.array_specs(outputs)},
                                      frames.array_bytes(outputs))
        except Exception as e:  # noqa: BLE001  (reported to the daemon, which logs it as INTERNAL)
            reply = frames.encode({"ok": False, "error": f"{type(e).__name__}: {e}"})
        connection.send_bytes(reply)


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)
