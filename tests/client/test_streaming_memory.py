"""The client's peak memory while a streamed Execute moves 64 MiB in and 64 MiB out (issue 17: at most twice the
payload), measured in a client process of its own against a real daemon (benchmarks/client_memory.py): the output
array it fills is one payload, so the pieces gRPC and glibc hold must stay under another (xlacs.streaming's
receive window and one malloc arena; docs/data_plane.md)."""
import numpy as np

from benchmarks import client_memory, models
from xlacs import streaming


def test_a_streamed_64_mib_round_trip_peaks_under_twice_its_payload(server, client, tmp_path):
    model = models.round_trip(64 * models.MB)
    executable = model.compile(client)
    assert streaming.moved_bytes(dict(zip(executable.input_names, model.inputs)), 64 * models.MB) \
        >= streaming.STREAM_BYTES  # so the client streams it
    (out,) = executable(*model.inputs)
    np.testing.assert_array_equal(out, model.inputs[0] + 1)
    peak = client_memory.measure(server.address, model, tmp_path)
    assert 64 * models.MB <= peak < 2 * 64 * models.MB, f"peak {peak / models.MB:.0f} MiB for 64 MiB in and out"
