"""Same-host shared memory (docs/data_plane.md, Shared memory): sessions and the regions registered under them.

A region is part of a client's shared-memory object, open in the daemon; an Execute reads inputs from it and writes
outputs into it, so the tensors' bytes never travel through gRPC. The object is a POSIX one (/dev/shm/<key without
its slash>), read and written with pread and pwrite, or a memfd of the client's named by its descriptor
(/proc/<pid>/fd/<fd>): one sealed against shrinking is mapped, its inputs read as views and its outputs written in
place. The daemon never creates or unlinks the object: it opens it at RegisterSharedMemory and closes it at
UnregisterSharedMemory, when the session's OpenSession call ends (the client closes it or goes away), or at
shutdown. A region in use by an Execute is closed when that Execute is done with it.
"""
from __future__ import annotations

import dataclasses
import fcntl
import logging
import mmap
import os
import re
import secrets
import stat
import threading
from typing import Callable

import numpy as np
from xlacs import dtypes

from xlacs_server.errors import InvalidRequest, LimitExceeded, NotFound, PermissionDenied, echoed

log = logging.getLogger(__name__)

SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared-memory objects: shm_open("/k") opens /dev/shm/k
# shm_open's portable names: one leading slash and no other; a file name of at most 255 bytes.
KEY = re.compile(r"/[A-Za-z0-9_.-]{1,255}")
MEMFD_KEY = re.compile(r"/proc/([0-9]{1,10})/fd/([0-9]{1,10})")  # a client's memfd, by its descriptor
WRITE_SEALS = fcntl.F_SEAL_WRITE | 0x10  # and F_SEAL_FUTURE_WRITE (Linux 5.1), which fcntl does not name
MEMFD_PREFIX = "/memfd:xlacs"  # what /proc/<pid>/fd/<fd> of a memfd made for xlacs links to: memfd_create("xlacs…")
REGION_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
POLICIES = ("off", "local", "any")  # who may register regions (settings.shared_memory)
_LOCAL_PEERS = re.compile(r"(unix:|unix-abstract:|ipv4:127\.|ipv6:(\[|%5B)::1(\]|%5D):)")


@dataclasses.dataclass(eq=False)
class Region:
    """Bytes [offset, offset + byte_size) of one shared-memory object, open read-write. A memfd sealed against
    shrinking (F_SEAL_SHRINK) is mapped: no one can truncate it, so no page of the mapping can vanish under the
    daemon. Any other object is read and written with pread and pwrite, never through a mapping: its client may
    shrink it at any time, and touching a mapped page past the object's end would kill the daemon (SIGBUS), where
    a read only comes up short."""
    name: str
    key: str
    offset: int
    byte_size: int
    _fd: int = dataclasses.field(repr=False)
    _map: mmap.mmap | None = dataclasses.field(default=None, repr=False)  # a sealed memfd's, from its offset's page
    users: int = 1  # its registration, plus each Execute using it now

    @classmethod
    def open(cls, name: str, key: str, offset: int, byte_size: int) -> "Region":
        memfd = MEMFD_KEY.fullmatch(key)
        if not memfd and (not KEY.fullmatch(key) or key in ("/.", "/..")):
            raise InvalidRequest(f"region {echoed(name)}: key {echoed(key)} is not a POSIX shared-memory name: "
                                 "one leading slash, then 1 to 255 of A-Z a-z 0-9 _ . - (as shm_open takes it), "
                                 "nor a memfd's /proc/<pid>/fd/<fd>", region=name, key=key[:80])
        if offset < 0 or byte_size <= 0:
            raise InvalidRequest(f"region {echoed(name)}: offset {offset} and byte_size {byte_size} must be >= 0 "
                                 "and > 0", region=name)
        fd = _open_memfd(name, key, int(memfd[1])) if memfd else _open_shm(name, key)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidRequest(f"region {echoed(name)}: {echoed(key)} is not a shared-memory object",
                                     region=name, key=key)
            if info.st_size < offset + byte_size:
                raise InvalidRequest(f"region {echoed(name)}: {echoed(key)} has {info.st_size} bytes, fewer than "
                                     f"offset + byte_size = {offset + byte_size}", region=name, key=key)
            region = cls(name, key, offset, byte_size, fd)
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS) if memfd else 0
            if seals & WRITE_SEALS:
                raise InvalidRequest(f"region {echoed(name)}: memfd {echoed(key)} is sealed against writing: outputs "
                                     "could not be written into it", region=name, key=key)
            if seals & fcntl.F_SEAL_SHRINK and info.st_blksize == mmap.PAGESIZE:
                # (not MFD_HUGETLB: a hole punched in one can fault SIGBUS.) Populated now: an Execute's first touch of
                # each page would fault it in (0.85 s for 256 MiB under load)
                start = offset - offset % mmap.ALLOCATIONGRANULARITY
                region._map = mmap.mmap(fd, offset + byte_size - start, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                                        offset=start)
        except BaseException:
            os.close(fd)
            raise
        return region

    @property
    def mapped(self) -> bool:
        return self._map is not None

    def _at(self, ref, what: str, dtype: np.dtype, shape: tuple[int, ...]) -> int:
        """Where the array of `dtype` and `shape` at `ref` (a SharedMemoryRef into this region) starts in the
        object, checked; `what` names the input or output in errors."""
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if ref.byte_size != expected:
            raise InvalidRequest(f"{what}: shared_memory.byte_size is {ref.byte_size}, but {dtype}{list(shape)} "
                                 f"has {expected} bytes")
        if ref.offset < 0 or ref.offset + ref.byte_size > self.byte_size:
            raise InvalidRequest(f"{what}: bytes [{ref.offset}, {ref.offset + ref.byte_size}) are not within region "
                                 f"{echoed(self.name)} of {self.byte_size} bytes")
        if not self.mapped:  # a sealed memfd cannot shrink
            size = os.fstat(self._fd).st_size
            if size < self.offset + self.byte_size:
                raise self._shrank(what, size)
        return self.offset + ref.offset

    def _view(self, at: int, dtype: np.dtype, shape: tuple[int, ...], *, writable: bool) -> np.ndarray:
        """The array of `dtype` and `shape` at byte `at` of the object, a view of the mapping."""
        start = at - (self.offset - self.offset % mmap.ALLOCATIONGRANULARITY)
        memory = memoryview(self._map)[start:start + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize]
        return np.frombuffer(memory if writable else memory.toreadonly(), dtype).reshape(shape)

    def read(self, ref, what: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The array at `ref`: a read-only view of a mapped region, else a copy, one read from the object into the
        array's memory."""
        at = self._at(ref, what, dtype, shape)
        if self.mapped:
            return self._view(at, dtype, shape, writable=False)
        array = np.empty(shape, dtype)
        into = memoryview(array.reshape(-1).view(np.uint8))  # bytes of any dtype (bfloat16 has no buffer format)
        while into:
            done = os.preadv(self._fd, [into], at)
            if done == 0:  # the object shrank since the check above
                raise self._shrank(what, os.fstat(self._fd).st_size)
            into, at = into[done:], at + done
        return array

    def write(self, ref, what: str, array: np.ndarray) -> None:
        """`array`'s bytes at `ref`, if it has exactly their size: copied into the mapping, or one pwrite."""
        at = self._at(ref, what, array.dtype, array.shape)
        if self.mapped:
            np.copyto(self._view(at, array.dtype, array.shape, writable=True), array)
            return
        data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
        while data:
            done = os.pwritev(self._fd, [data], at)
            data, at = data[done:], at + done

    def _shrank(self, what: str, size: int) -> InvalidRequest:
        return InvalidRequest(f"{what}: shared-memory object {echoed(self.key)} shrank to {size} bytes since region "
                              f"{echoed(self.name)} was registered")

    def close(self) -> None:
        os.close(self._fd)
        if self.mapped:
            try:
                self._map.close()
            except BufferError:  # an array still views it: the mapping goes with the last view
                log.debug("region %s of %s unmapped when its last view goes", self.name, self.key)


def _open_shm(name: str, key: str) -> int:
    """A descriptor of POSIX shared-memory object `key`, open read-write."""
    path = os.path.join(SHM_DIR, key[1:])
    try:  # no symlinks: /dev/shm is writable by every user
        return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidRequest(f"region {echoed(name)}: no shared-memory object {echoed(key)} on the daemon's "
                             f"host ({path}); create it first, on the same host (or /dev/shm) as the daemon",
                             region=name, key=key) from None
    except OSError as e:
        raise InvalidRequest(f"region {echoed(name)}: the daemon (uid {os.getuid()}) cannot open "
                             f"{echoed(key)} read-write ({e.strerror}): give the object a mode that lets it",
                             region=name, key=key) from None


def _open_memfd(name: str, key: str, pid: int) -> int:
    """A descriptor of the memfd at `key` (/proc/<pid>/fd/<fd>), open read-write. The link is first opened with
    O_PATH, which opens nothing behind it (a device's open could act), and reopened read-write only once it is
    known to be a memfd made for xlacs (one of another process of the daemon's user is not for its clients)."""
    try:
        path_fd = os.open(key, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidRequest(f"region {echoed(name)}: no process {pid} with that descriptor on the daemon's host "
                             f"({echoed(key)}); a client in another PID namespace (a container) registers a POSIX "
                             "shared-memory object instead", region=name, key=key) from None
    except OSError as e:
        raise InvalidRequest(f"region {echoed(name)}: the daemon (uid {os.getuid()}) cannot open {echoed(key)} "
                             f"({e.strerror}): a memfd is for a client of the daemon's user", region=name,
                             key=key) from None
    try:
        own = f"/proc/self/fd/{path_fd}"
        if not stat.S_ISREG(os.fstat(path_fd).st_mode) or not os.readlink(own).startswith(MEMFD_PREFIX):
            raise InvalidRequest(f"region {echoed(name)}: {echoed(key)} is not a memfd made for xlacs (one created "
                                 "as memfd_create('xlacs…'))", region=name, key=key)
        try:
            return os.open(own, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise InvalidRequest(f"region {echoed(name)}: the daemon cannot open {echoed(key)} read-write "
                                 f"({e.strerror})", region=name, key=key) from None
    finally:
        os.close(path_fd)


@dataclasses.dataclass(eq=False)
class Session:
    id: str
    end: Callable[[], None]  # ends its OpenSession call (with OK)
    regions: dict[str, Region] = dataclasses.field(default_factory=dict)


class Lease:
    """The regions one Execute uses, held until it is done with them (the end of its `with` block)."""

    def __init__(self, sessions: "SharedMemory", session_id: str):
        self._sessions = sessions
        self._session_id = session_id
        self._held: list[Region] = []

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        held, self._held = self._held, []
        self._sessions.release(held)

    def _region(self, ref, what: str) -> Region:
        if not self._session_id:
            raise InvalidRequest(f"{what}: shared_memory needs the request's session_id (OpenSession)")
        region = self._sessions.acquire(self._session_id, ref.region, what)
        self._held.append(region)
        return region

    def input(self, tensor) -> np.ndarray:
        """The input `tensor` (an xlacs.v1.Tensor with shared_memory), read from its region into a new array."""
        what = f"input {echoed(tensor.name)}"
        try:
            dtype = dtypes.to_numpy(tensor.dtype)
        except dtypes.UnsupportedDType as e:
            raise InvalidRequest(f"{what} has {e}") from None
        shape = tuple(tensor.shape)
        if any(d < 0 for d in shape):
            raise InvalidRequest(f"{what} has a negative dimension in shape {list(shape)}")
        return self._region(tensor.shared_memory, what).read(tensor.shared_memory, what, dtype, shape)

    def output(self, name: str, ref) -> "Target":
        """Where output `name` goes: `ref`, in a region of the session."""
        return Target(name, ref, self._region(ref, f"output {echoed(name)}"))


@dataclasses.dataclass(frozen=True)
class Target:
    """Bytes of a leased region that an output is written into."""
    name: str
    ref: object  # xlacs.v1.SharedMemoryRef
    region: Region

    def write(self, array: np.ndarray) -> None:
        """Copies the output into the region, if `ref` has exactly its size."""
        self.region.write(self.ref, f"output {echoed(self.name)}", array)


class SharedMemory:
    """The open sessions and their regions, bounded by max_sessions and max_session_regions."""

    def __init__(self, settings):
        if settings.shared_memory not in POLICIES:
            raise ValueError(f"shared_memory={settings.shared_memory!r}: use one of {POLICIES}")
        self.settings = settings
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, peer: str, end: Callable[[], None]) -> str:
        """A new session's id; `end` ends its call, when the daemon shuts down."""
        self._check_peer(peer)
        with self._lock:
            if len(self._sessions) >= self.settings.max_sessions:
                raise LimitExceeded(f"{len(self._sessions)} sessions are open", "max_sessions",
                                    self.settings.max_sessions)
            session = Session(secrets.token_urlsafe(18), end)
            self._sessions[session.id] = session
        return session.id

    def close(self, session_id: str) -> int:
        """Ends a session, closing its regions; how many it had."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
            regions = list(session.regions.values()) if session else []
        self.release(regions)
        return len(regions)

    def register(self, session_id: str, name: str, key: str, offset: int, byte_size: int, peer: str) -> None:
        self._check_peer(peer)
        if not REGION_NAME.fullmatch(name):
            raise InvalidRequest(f"region name {echoed(name)} must be 1 to 128 of A-Z a-z 0-9 _ . : / -")
        with self._lock:
            self._session(session_id)
        region = Region.open(name, key, offset, byte_size)  # outside the lock: it touches the file system
        try:
            with self._lock:
                session = self._session(session_id)
                if name in session.regions:
                    raise InvalidRequest(f"region {echoed(name)} is registered already in this session; "
                                         "unregister it first", region=name)
                if len(session.regions) >= self.settings.max_session_regions:
                    raise LimitExceeded(f"the session has {len(session.regions)} regions", "max_session_regions",
                                        self.settings.max_session_regions)
                session.regions[name] = region
        except Exception:
            region.close()
            raise
        log.info("session %s… opened region %s: %s [%d, %d)", session_id[:6], name, key, offset, offset + byte_size)

    def unregister(self, session_id: str, name: str) -> int:
        """Closes region `name` of the session, or all of its regions when `name` is empty; how many."""
        with self._lock:
            session = self._session(session_id)
            if not name:
                regions, session.regions = list(session.regions.values()), {}
            elif name in session.regions:
                regions = [session.regions.pop(name)]
            else:
                raise NotFound(f"region {echoed(name)} is not registered in this session", region=name)
        self.release(regions)
        return len(regions)

    def lease(self, session_id: str) -> Lease:
        """For one Execute: `with shared_memory.lease(id) as lease`, then `lease.input`, `lease.output`."""
        return Lease(self, session_id)

    def acquire(self, session_id: str, name: str, what: str) -> Region:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                raise InvalidRequest(f"{what}: session {echoed(session_id)} is not open on this server "
                                     "(it ended, or another server opened it)")
            region = session.regions.get(name)
            if region is None:
                raise InvalidRequest(f"{what}: region {echoed(name)} is not registered in the session")
            region.users += 1
        return region

    def release(self, regions: list[Region]) -> None:
        """Drops one use of each region (a registration or an Execute's); closes those nothing uses."""
        closing = []
        with self._lock:
            for region in regions:
                region.users -= 1
                if region.users == 0:
                    closing.append(region)
        for region in closing:
            region.close()

    def totals(self) -> tuple[int, int, int]:
        """(sessions, regions, bytes) registered now."""
        with self._lock:
            regions = [r for s in self._sessions.values() for r in s.regions.values()]
            return len(self._sessions), len(regions), sum(r.byte_size for r in regions)

    def close_all(self) -> None:
        """At shutdown: every session ends, and so does its call (a drain would wait for it otherwise)."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            self.close(session.id)
            session.end()

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFound(f"session {echoed(session_id)} is not open on this server (it ended, or another server "
                           "opened it); open one with OpenSession", session=session_id[:80])
        return session

    def _check_peer(self, peer: str) -> None:
        policy = self.settings.shared_memory
        if policy == "any" or (policy == "local" and _LOCAL_PEERS.match(peer)):
            return
        raise PermissionDenied(
            "shared memory is off on this server (shared_memory=off)" if policy == "off" else
            f"shared memory is for clients on the daemon's host (shared_memory=local), and {echoed(peer)} is not "
            "a loopback or Unix-socket peer; a client in a container that shares the host's /dev/shm needs "
            "XLACS_SHARED_MEMORY=any", setting="shared_memory")

