"""Same-host shared memory over real gRPC: Execute reads inputs from a client's POSIX shared-memory region and writes
outputs into one; every bad reference is INVALID_ARGUMENT naming its input or output; the daemon unmaps a region
when the client unregisters it, when its session's call ends (the client closes its channel), and at shutdown;
sessions are bounded by max_sessions and hold no gRPC thread."""
import contextlib
import fcntl
import gc
import os
import secrets
import socket
import time

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.graphs import GraphBuilder
from tests.security.conftest import running
from xlacs import Client, SharedMemory, dtypes, freeze
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server.dashboard import create_app
from xlacs_server.errors import InvalidRequest
from xlacs_server.execute.shared_memory import Region
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.config import Settings
from xlacs_server.metrics import registry_for
from xlacs_server.rpc.server import create_server
from xlacs_server.daemon import Daemon

SHAPE = (512, 256)  # 512 KiB of float32


def scale_graph():
    """y = x * 2 and z = x + w on float32 x and w: a GraphDef, its feeds and fetches."""
    b = GraphBuilder()
    x, w = b.placeholder("x", shape=SHAPE), b.placeholder("w", shape=SHAPE)
    b.op("y", "Mul", x, b.const("two", np.float32(2)))
    b.op("z", "AddV2", x, w)
    return b.graph_def, {"x:0": (np.float32, SHAPE), "w:0": (np.float32, SHAPE)}, ["y:0", "z:0"]


def mapped(key: str) -> bool:
    """Whether this process holds the shared-memory object `key` open or mapped: the tests' daemon runs in it,
    so for an object the test made by hand (shm_object), whether the daemon holds it."""
    path = f"/dev/shm{key}"
    with open("/proc/self/maps") as f:
        if any(line.rstrip().endswith(path) or f"{path} (deleted)" in line for line in f):
            return True
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target in (path, f"{path} (deleted)"):
            return True
    return False


def wait_for(condition, what: str, timeout_s: float = 20):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def daemon():
    with running() as server:
        yield server


@pytest.fixture
def client(daemon):
    with Client(daemon.address, timeout=120) as c:
        yield c


@pytest.fixture
def executable(client):
    return client.compile(*scale_graph())


def values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def test_inputs_and_outputs_through_shared_memory_match_numpy(daemon, client, executable):
    x, w = values(0), values(1)
    received = client.stats().received_bytes["Execute"] if "Execute" in client.stats().received_bytes else 0
    with SharedMemory(client, 4 << 20) as shm:
        x_in, w_in = shm.put(x), shm.put(w)
        y, z = shm.array(SHAPE, np.float32), shm.array(SHAPE, np.float32)
        outputs = executable.execute({"x:0": x_in, "w:0": w_in}, out={"y:0": y, "z:0": z})
        assert outputs[0] is y and outputs[1] is z
        np.testing.assert_array_equal(y, x * 2)
        np.testing.assert_array_equal(z, x + w)
        # The bytes stayed in shared memory: the requests carried references only
        assert client.stats().received_bytes["Execute"] - received < 2000
        # Mixed: one input by reference, one by content; one output into the region, the other returned
        w2 = values(2)
        y2, z2 = executable.execute({"x:0": x_in, "w:0": w2}, out={"z:0": z})
        assert z2 is z
        np.testing.assert_array_equal(y2, x * 2)
        np.testing.assert_array_equal(z, x + w2)
        stats = client.stats()
        assert (stats.shared_memory_regions, stats.shared_memory_bytes) == (1, 4 << 20)
    assert client.stats().shared_memory_regions == 0
    assert not os.path.exists(f"/dev/shm{shm.key}"), "the client unlinks its object on close"


def test_the_metrics_and_the_dashboard_count_the_regions(daemon, client):
    metrics = registry_for(daemon.service)
    http = HttpServer(create_app(daemon.service), "127.0.0.1", 0)
    http.start()
    try:
        with SharedMemory(client, 1 << 20), SharedMemory(client, 3 << 20):
            assert metrics.get_sample_value("xlacs_shared_memory_regions") == 2
            assert metrics.get_sample_value("xlacs_shared_memory_bytes") == 4 << 20
            assert metrics.get_sample_value("xlacs_shared_memory_sessions") >= 1
            cache = httpx.get(f"http://127.0.0.1:{http.port}/api/cache", timeout=30).json()
            assert cache["shared_memory"]["regions"] == 2 and cache["shared_memory"]["bytes"] == 4 << 20
            page = httpx.get(f"http://127.0.0.1:{http.port}/cache", timeout=30).text
            assert '<span class="regions">2</span>' in page
        assert metrics.get_sample_value("xlacs_shared_memory_regions") == 0
        assert httpx.get(f"http://127.0.0.1:{http.port}/api/cache", timeout=30).json()["shared_memory"]["regions"] == 0
    finally:
        http.stop()


@contextlib.contextmanager
def shm_object(size: int):
    """A POSIX shared-memory object made by hand (no session): its key."""
    key = f"/xlacs-test-{secrets.token_hex(6)}"
    fd = os.open(f"/dev/shm{key}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, size)
    os.close(fd)
    try:
        yield key
    finally:
        os.unlink(f"/dev/shm{key}")


def refused(call, code=grpc.StatusCode.INVALID_ARGUMENT) -> str:
    with pytest.raises(grpc.RpcError) as error:
        call()
    assert error.value.code() == code, error.value.details()
    return error.value.details()


def register(client, session_id, name, key, offset=0, byte_size=4096):
    return lambda: client.stub.RegisterSharedMemory(xlacs_pb2.RegisterSharedMemoryRequest(
        session_id=session_id, name=name, key=key, offset=offset, byte_size=byte_size), timeout=30)


def test_a_program_run_in_an_execution_worker_reads_and_writes_shared_memory(daemon, client):
    # A program with a loop runs in a worker process (isolate_executions=loops): its inputs leave the region there
    frozen = freeze(lambda x: tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), (0, x))[1],
                    tf.TensorSpec(SHAPE, tf.float32), lower_control_flow=False)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    assert daemon.service.loaded(executable.id).executable.isolated
    with SharedMemory(client, 2 << 20) as shm:
        x, y = shm.put(values(7)), shm.array(SHAPE)
        (out,) = executable.execute({next(iter(frozen.feeds)): x}, out={frozen.fetches[0]: y})
        assert out is y
        np.testing.assert_array_equal(y, values(7) * 8)


def test_bad_registrations_say_what_is_wrong(daemon, client, tmp_path):
    session = client.regions.session()
    with shm_object(8192) as key:
        assert "not a POSIX shared-memory name" in refused(register(client, session, "r", key[1:]))
        assert "not a POSIX shared-memory name" in refused(register(client, session, "r", "/a/b"))
        assert "not a POSIX shared-memory name" in refused(register(client, session, "r", "/" + "x" * 300))
        assert "no shared-memory object" in refused(register(client, session, "r", key + "-missing"))
        assert "fewer than offset + byte_size = 8193" in refused(register(client, session, "r", key, 1, 8192))
        assert "must be >= 0 and > 0" in refused(register(client, session, "r", key, -1))
        assert "must be >= 0 and > 0" in refused(register(client, session, "r", key, 0, 0))
        assert "region name" in refused(register(client, session, "bad name!", key))
        assert "is not open" in refused(register(client, "no-such-session", "r", key), grpc.StatusCode.NOT_FOUND)
        register(client, session, "r", key, 4096, 4096)()  # an offset within the object, past a page
        assert mapped(key)
        assert "registered already" in refused(register(client, session, "r", key))
        assert daemon.service.shared_memory.totals()[1:] >= (1, 4096)
        unregister = xlacs_pb2.UnregisterSharedMemoryRequest(session_id=session, name="r")
        assert client.stub.UnregisterSharedMemory(unregister).regions == 1
        assert "not registered" in refused(lambda: client.stub.UnregisterSharedMemory(unregister),
                                           grpc.StatusCode.NOT_FOUND)
        assert not mapped(key)
    # A symlink in /dev/shm (writable by every user) is not followed to a file of the daemon's user
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 8192)
    link = f"/xlacs-test-link-{secrets.token_hex(4)}"
    os.symlink(secret, f"/dev/shm{link}")
    try:
        assert "cannot open" in refused(register(client, session, "link", link))
    finally:
        os.unlink(f"/dev/shm{link}")


def execute_request(executable, session_id, x_ref, w_ref, z_ref=None, shape=SHAPE):
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id, session_id=session_id)
    for name, ref, dims in (("x:0", x_ref, shape), ("w:0", w_ref, SHAPE)):
        request.inputs.add(name=name, dtype=dtypes.from_numpy(np.float32), shape=dims).shared_memory.CopyFrom(ref)
    if z_ref is not None:
        request.outputs.add(name="z:0").shared_memory.CopyFrom(z_ref)
    return request


def test_bad_references_in_an_execute_name_the_input_or_output(client, executable):
    nbytes = int(np.prod(SHAPE)) * 4
    with SharedMemory(client, 8 << 20) as shm:
        session = client.regions.session_id
        x, w, y = shm.put(values(3)), shm.array(SHAPE), shm.array(SHAPE)
        w[...] = 1
        ref = xlacs_pb2.SharedMemoryRef

        def execute(session=session, x_ref=shm.ref(x), **kwargs):
            return lambda: client.stub.Execute(execute_request(executable, session, x_ref, shm.ref(w), **kwargs),
                                               timeout=60)
        cases = [
            ("no session", dict(session=""), "input 'x:0': shared_memory needs the request's session_id"),
            ("unknown session", dict(session="nope"), "input 'x:0': session 'nope' is not open"),
            ("unknown region", dict(x_ref=ref(region="nope", offset=0, byte_size=nbytes)),
             "input 'x:0': region 'nope' is not registered"),
            ("past the end", dict(x_ref=ref(region=shm.name, offset=(8 << 20) - 4096, byte_size=nbytes)),
             "input 'x:0': bytes"),
            ("negative offset", dict(x_ref=ref(region=shm.name, offset=-4, byte_size=nbytes)), "input 'x:0': bytes"),
            ("size against shape", dict(x_ref=ref(region=shm.name, offset=0, byte_size=nbytes - 4)),
             f"input 'x:0': shared_memory.byte_size is {nbytes - 4}"),
            ("shape against the signature", dict(shape=(256, 256), x_ref=ref(region=shm.name, byte_size=nbytes // 2)),
             "input 'x:0': expected float32[512, 256]"),
            ("output size", dict(z_ref=ref(region=shm.name, offset=0, byte_size=nbytes * 2)),
             f"output 'z:0': shared_memory.byte_size is {nbytes * 2}"),
            ("output region", dict(z_ref=ref(region="nope", offset=0, byte_size=nbytes)),
             "output 'z:0': region 'nope' is not registered"),
        ]
        for case, kwargs, message in cases:
            assert message in refused(execute(**kwargs)), case
        bad_output = execute_request(executable, session, shm.ref(x), shm.ref(w))
        bad_output.outputs.add(name="nope:0").shared_memory.CopyFrom(ref(region=shm.name, byte_size=nbytes))
        assert "output 'nope:0'" in refused(lambda: client.stub.Execute(bad_output, timeout=60))
        # Still usable after all of that
        executable.execute({"x:0": x, "w:0": w}, out={"y:0": y})
        np.testing.assert_array_equal(y, values(3) * 2)


def test_an_object_shrunk_after_registration_is_refused_not_a_crash(client, executable):
    with SharedMemory(client, 4 << 20, sealed=False) as shm:  # a POSIX object: anyone with access can shrink it
        x, y = shm.put(values(4)), shm.array(SHAPE)
        os.truncate(f"/dev/shm{shm.key}", 4096)
        assert "shrank to 4096 bytes" in refused(lambda: executable.execute({"x:0": x, "w:0": x}, out={"y:0": y}))
        os.truncate(f"/dev/shm{shm.key}", 4 << 20)
        executable.execute({"x:0": x, "w:0": x}, out={"y:0": y})


@contextlib.contextmanager
def held(daemon, session: str, name: str):
    """Region `name` of the session as the daemon holds it, for as long as an Execute would."""
    region = daemon.service.shared_memory.acquire(session, name, "test")
    try:
        yield region
    finally:
        daemon.service.shared_memory.release([region])


def test_a_sealed_memfd_is_mapped_and_its_inputs_are_views(daemon, client, executable):
    x, w = values(5), values(6)
    with SharedMemory(client, 4 << 20) as shm:  # the default: a memfd sealed against shrinking
        assert shm.key == f"/proc/{os.getpid()}/fd/" + shm.key.rsplit("/", 1)[1]
        x_in, w_in, z = shm.put(x), shm.put(w), shm.array(SHAPE)
        (y, z_out) = executable.execute({"x:0": x_in, "w:0": w_in}, out={"z:0": z})
        assert z_out is z
        np.testing.assert_array_equal(y, x * 2)
        np.testing.assert_array_equal(z, x + w)
        with held(daemon, client.regions.session_id, shm.name) as region:
            assert region.mapped
            tensor = xlacs_pb2.Tensor(name="x:0", dtype=dtypes.from_numpy(np.float32), shape=SHAPE)
            tensor.shared_memory.CopyFrom(shm.ref(x_in))
            with daemon.service.shared_memory.lease(client.regions.session_id) as lease:
                view = lease.input(tensor)
                assert not view.flags.writeable
                x_in[0, 0] = 42  # the client's write shows in the daemon's input: a view, not a copy
                assert view[0, 0] == 42
                del view
        assert mapped_memfd(shm.name)
        del x_in, w_in, z, z_out  # the client's views of it
        gc.collect()  # views caught in reference cycles (the assertions' frames) go with them
    assert not mapped_memfd(shm.name), "closing the SharedMemory unmaps it in the daemon and the client"


def mapped_memfd(name: str) -> bool:
    """Whether this process (the tests' daemon and client) maps memfd `name`."""
    with open("/proc/self/maps") as f:
        return any(f"/memfd:{name} (deleted)" in line for line in f)


@contextlib.contextmanager
def memfd(name: str, size: int, seals: int = 0):
    """A memfd made by hand, with `seals`: its /proc key."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    try:
        yield f"/proc/{os.getpid()}/fd/{fd}", fd
    finally:
        os.close(fd)


def test_a_memfd_without_the_shrink_seal_is_read_not_mapped(daemon, client, executable):
    session = client.regions.session()
    nbytes = int(np.prod(SHAPE)) * 4
    with memfd(f"xlacs-test-{secrets.token_hex(4)}", 2 * nbytes, fcntl.F_SEAL_GROW) as (key, fd):
        os.pwrite(fd, values(8).tobytes(), 0)
        register(client, session, "unsealed", key, 0, 2 * nbytes)()
        try:
            with held(daemon, session, "unsealed") as region:
                assert not region.mapped
            ref = xlacs_pb2.SharedMemoryRef(region="unsealed", offset=0, byte_size=nbytes)
            reply = client.stub.Execute(execute_request(executable, session, ref, ref, ref), timeout=60)
            np.testing.assert_array_equal(np.frombuffer(reply.outputs[0].content, np.float32).reshape(SHAPE),
                                          values(8) * 2)
            z = np.frombuffer(os.pread(fd, nbytes, 0), np.float32).reshape(SHAPE)  # written with pwrite
            np.testing.assert_array_equal(z, values(8) * 2)
            os.ftruncate(fd, 4096)  # it can shrink: refused, not a crash
            assert "shrank to 4096 bytes" in refused(lambda: client.stub.Execute(
                execute_request(executable, session, ref, ref), timeout=60))
        finally:
            client.stub.UnregisterSharedMemory(xlacs_pb2.UnregisterSharedMemoryRequest(session_id=session,
                                                                                     name="unsealed"))


def test_bad_proc_paths_are_refused_naming_the_region(client, tmp_path):
    session = client.regions.session()
    pid = os.getpid()
    seals = fcntl.F_SEAL_SHRINK
    for key in ("/proc/self/fd/0", f"/proc/{pid}/fd/../fd/0", f"/proc/{pid}/fd/", f"/proc/{pid}/fdinfo/1",
                f"/proc/{pid}/root/dev/shm/x", f"/proc/{pid}/fd/1/x"):
        assert "region 'r': key" in refused(register(client, session, "r", key)), key
    file = open(tmp_path / "plain", "wb+")
    file.truncate(8192)
    read, write = os.pipe()
    null = os.open("/dev/null", os.O_RDWR)
    try:
        with memfd("not-for-xlacs", 8192, seals) as (other, _), memfd("xlacs-test-small", 8192) as (small, _):
            cases = [(f"/proc/{pid}/fd/{file.fileno()}", "is not a memfd made for xlacs"),
                     (other, "is not a memfd made for xlacs"),
                     (f"/proc/{pid}/fd/{read}", "is not a memfd made for xlacs"),
                     (f"/proc/{pid}/fd/{null}", "is not a memfd made for xlacs"),
                     (f"/proc/{pid}/fd/99999", "no process"),
                     ("/proc/4294967295/fd/1", "no process"),
                     (small, "fewer than offset + byte_size = 16384")]
            for key, message in cases:
                details = refused(register(client, session, "r", key, 0, 16384 if key == small else 4096))
                assert details.startswith("region 'r'") and message in details, (key, details)
    finally:
        file.close()
        os.close(read), os.close(write), os.close(null)
    assert client.stats().shared_memory_regions == 0


def test_an_object_that_shrinks_during_a_read_is_refused_not_a_crash(monkeypatch):
    # The size check passes, then the client truncates its object: the read comes up short (a mapping of the
    # object would have taken SIGBUS there and killed the daemon).
    with shm_object(1 << 20) as key:
        region = Region.open("r", key, 0, 1 << 20)
        try:
            os.truncate(f"/dev/shm{key}", 4096)
            monkeypatch.setattr(Region, "_at", lambda self, ref, what, dtype, shape: 0)  # the check, passed before
            with pytest.raises(InvalidRequest, match="shrank to 4096 bytes"):
                region.read(xlacs_pb2.SharedMemoryRef(region="r", byte_size=1 << 20), "input 'x:0'",
                            np.dtype(np.uint8), (1 << 20,))
        finally:
            region.close()


def test_a_client_that_goes_away_leaves_nothing_mapped(daemon):
    # By the session's id, not by the totals: an earlier test's session may still be ending meanwhile.
    shared_memory = daemon.service.shared_memory

    def registered(session_id: str) -> bool:
        try:
            shared_memory.release([shared_memory.acquire(session_id, "r", "the test")])
        except InvalidRequest:
            return False
        return True
    with shm_object(1 << 20) as key, grpc.insecure_channel(daemon.address) as channel:
        stub = xlacs_pb2_grpc.CompilerStub(channel)
        call = stub.OpenSession(xlacs_pb2.OpenSessionRequest())  # the session lasts as long as the call
        session_id = next(call).session_id
        stub.RegisterSharedMemory(xlacs_pb2.RegisterSharedMemoryRequest(
            session_id=session_id, name="r", key=key, byte_size=1 << 20), timeout=30)
        assert registered(session_id) and mapped(key)
        channel.close()  # no Unregister, no end of the session: as a client that crashes
        wait_for(lambda: not registered(session_id), "the session's end")
        assert not mapped(key)


def test_unregistering_every_region_of_the_session(client):
    with shm_object(1 << 20) as first, shm_object(1 << 20) as second:
        session = client.regions.session()
        register(client, session, "first", first, 0, 1 << 20)()
        register(client, session, "second", second, 0, 1 << 20)()
        removed = client.stub.UnregisterSharedMemory(xlacs_pb2.UnregisterSharedMemoryRequest(session_id=session))
        assert removed.regions == 2 and not mapped(first) and not mapped(second)


def test_a_region_unregistered_during_an_execute_is_unmapped_when_the_execute_is_done(daemon, client):
    with shm_object(1 << 20) as key:
        session = client.regions.session()
        register(client, session, "r", key, 0, 1 << 20)()
        tensor = xlacs_pb2.Tensor(name="x:0", dtype=dtypes.from_numpy(np.float32), shape=[16])
        tensor.shared_memory.CopyFrom(xlacs_pb2.SharedMemoryRef(region="r", offset=4096, byte_size=64))
        with daemon.service.shared_memory.lease(session) as lease:  # as an Execute holds its regions
            view = lease.input(tensor)
            assert client.stub.UnregisterSharedMemory(xlacs_pb2.UnregisterSharedMemoryRequest(
                session_id=session, name="r")).regions == 1
            assert mapped(key) and view.sum() == 0  # still readable
            del view
        assert not mapped(key)


def test_a_daemon_that_stops_leaves_nothing_mapped():
    with shm_object(1 << 20) as key:
        with running() as server:  # stops as `xlacs serve` does: the server, then the service
            channel = grpc.insecure_channel(server.address)
            stub = xlacs_pb2_grpc.CompilerStub(channel)
            session = stub.OpenSession(xlacs_pb2.OpenSessionRequest())
            stub.RegisterSharedMemory(xlacs_pb2.RegisterSharedMemoryRequest(
                session_id=next(session).session_id, name="r", key=key, byte_size=1 << 20), timeout=30)
            assert mapped(key)
        assert not mapped(key), "the session's call was still open when the daemon stopped"
        assert server.service.shared_memory.totals() == (0, 0, 0)
        assert os.path.exists(f"/dev/shm{key}"), "the daemon never unlinks a client's object"
        channel.close()


def test_sessions_are_bounded_and_hold_no_thread():
    # 16 gRPC threads, and 20 sessions open: they hold none of them, so calls still run
    with running(workers=16, max_sessions=20) as server, grpc.insecure_channel(server.address) as channel, \
            Client(server.address, timeout=60) as client:
        stub = xlacs_pb2_grpc.CompilerStub(channel)
        # Opened one after another: 20 at once would be more calls in their handlers than the 16 threads admit
        # (maximum_concurrent_rpcs) until the first handlers return, a race a loaded CI machine lost once.
        calls, ids = [], set()
        for _ in range(20):
            calls.append(stub.OpenSession(xlacs_pb2.OpenSessionRequest()))
            ids.add(next(calls[-1]).session_id)
        assert len(ids) == 20
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        executable = client.compile(*scale_graph())
        np.testing.assert_array_equal(executable(values(5), values(6))[0], values(5) * 2)
        extra = stub.OpenSession(xlacs_pb2.OpenSessionRequest())
        message = refused(lambda: next(extra), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert "max_sessions=20" in message
        calls[0].cancel()
        wait_for(lambda: server.service.shared_memory.totals()[0] == 19, "the cancelled session's end")
        assert next(stub.OpenSession(xlacs_pb2.OpenSessionRequest())).session_id not in ids


def test_regions_per_session_are_bounded_and_the_policy_is_enforced():
    with running(max_session_regions=1) as server, Client(server.address, timeout=60) as client:
        with SharedMemory(client, 4096):
            with pytest.raises(grpc.RpcError) as error:
                SharedMemory(client, 4096)
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_session_regions=1" in error.value.details()
        assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"xlacs-{os.getpid()}-")], \
            "a region the daemon refused is unlinked"
    with running(shared_memory="off") as server, Client(server.address, timeout=60) as client:
        with pytest.raises(grpc.RpcError) as error:
            SharedMemory(client, 4096)
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "shared_memory=off" in error.value.details()


def non_loopback_address() -> str | None:
    """An address of this host other than loopback, if it has one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.254", 9))  # UDP: nothing is sent; the kernel picks the outgoing interface
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_local_admits_only_loopback_peers():
    address = non_loopback_address()
    assert address is not None, "this test needs a non-loopback interface"
    service = Daemon(Settings.from_env())
    server, port, _ = create_server(service, f"{address}:0")
    server.start()
    try:
        with Client(f"{address}:{port}", timeout=60) as client:
            with pytest.raises(grpc.RpcError) as error:
                SharedMemory(client, 4096)
            assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "shared_memory=local" in error.value.details() and address in error.value.details()
    finally:
        server.stop(grace=None)
        service.close()
