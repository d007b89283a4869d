"""The cache key: a hash of named ingredients, as jax's cache_key. The graph's name is not one: the same
program under another name is the same executable.

The ingredients themselves are listed by CompilePath.ingredients (pipeline/compile_path.py); this module hashes them and reads
the parts that come from the code and the runtime rather than the request (xlacs' own source, the device,
the versions, the compile options).
"""
import functools
import hashlib
import logging
import pathlib
import platform

import jax
import jaxlib

import xlacs
import xlacs_server
from xlacs_server import version
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.program import compile_options

log = logging.getLogger(__name__)

# Bump when the cache entry format or the meaning of an ingredient changes.
CACHE_FORMAT_VERSION = 3

# Debug options that change what XLA writes on the side, not the executable (the list jax's cache key clears).
_UNKEYED_DEBUG_OPTIONS = {
    "xla_force_host_platform_device_count": 0, "xla_dump_to": "", "xla_dump_hlo_module_re": "",
    "xla_dump_hlo_pass_re": "", "xla_dump_hlo_as_text": False, "xla_dump_hlo_as_proto": False,
    "xla_dump_hlo_as_dot": False, "xla_dump_hlo_as_url": False, "xla_dump_hlo_as_html": False,
    "xla_dump_fusion_visualization": False, "xla_dump_hlo_snapshots": False, "xla_dump_max_hlo_modules": False,
    "xla_dump_module_metadata": False, "xla_dump_compress_protos": False, "xla_dump_hlo_as_long_text": False,
    "xla_dump_disable_metadata": False, "xla_dump_hlo_pipeline_re": "", "xla_gpu_cuda_data_dir": "",
}


def cache_key(ingredients: list[tuple[str, str]]) -> str:
    """40 hex digits of a SHA-256 over the ingredients in order."""
    h = hashlib.sha256()
    for name, value in ingredients:
        h.update(name.encode())
        h.update(hashlib.sha256(value.encode()).digest())
        log.debug("cache key ingredient %s: %s", name, value[:200])
    return h.hexdigest()[:40]


def source_digest(packages: dict[str, pathlib.Path]) -> str:
    """SHA-256 over every .py file of the packages ({import name: directory}) and the TF OpList that lowerings
    take attr defaults from (.pb), each by its path inside its package and its bytes. Every file rather than a
    chosen few: a lowering rule, a pass, the importer, a dtype table of the client package or the code that
    calls them can each change the program, and a list of the ones that matter would go stale silently; the
    price is a recompile after an edit that changes no program."""
    h = hashlib.sha256()
    for name, directory in sorted(packages.items()):
        paths = sorted(directory.rglob("*.py"))
        if not paths:  # a source-less install (.pyc only) would make every build of xlacs share executables
            raise RuntimeError(f"package {name} in {directory} has no .py files: install xlacs with its source "
                               f"(pip install of the wheel or the checkout), since the cache key digests it")
        for path in sorted([*paths, *directory.rglob("*.pb")]):
            source = path.read_bytes()
            h.update(f"{name}/{path.relative_to(directory).as_posix()}\0{len(source)}\0".encode())
            h.update(source)
    return h.hexdigest()


# Read once, at import: the files of the packages this process imported, wherever they are installed
# (site-packages, an editable checkout, a PYTHONPATH entry).
SOURCE_DIGEST = source_digest({p.__name__: pathlib.Path(p.__file__).parent for p in (xlacs_server, xlacs)})


def code_identity() -> str:
    """The version of xlacs and a digest of the source that lowers and compiles: two builds that differ in one
    lowering rule do not share executables, even under one version number."""
    return f"xlacs={version.VERSION};source={SOURCE_DIGEST}"


def device_identity(device: DeviceRef) -> str:
    """Platform and device kind; for a CPU, also the host's instruction set, since XLA:CPU compiles for the
    host it runs on and an executable with AVX-512 code must not load on a host without it."""
    identity = f"{device.platform}:{device.kind}"
    return f"{identity}:{host_isa()}" if device.platform == "cpu" else identity


@functools.cache
def host_isa() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1] for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:  # not Linux: the machine name only
        flags = ""
    return f"{platform.machine()}/{hashlib.sha256(' '.join(sorted(flags.split())).encode()).hexdigest()[:16]}"


def runtime_identity(device: DeviceRef) -> str:
    return f"jax={jax.__version__};jaxlib={jaxlib.__version__};pjrt={device.device.client.platform_version}"


def compile_options_identity(device: DeviceRef) -> str:
    """A digest of the XLA compile options jax.jit uses (XLA_FLAGS and jax's optimization flags included, dump
    options and the device assignment excluded, so entries move between devices of one kind) and of the jax
    flags that change lowering."""
    options = compile_options(backend=device.device.client)
    debug = options.executable_build_options.debug_options
    for name, cleared in _UNKEYED_DEBUG_OPTIONS.items():
        setattr(debug, name, cleared)
    return (f"xla={hashlib.sha256(options.SerializeAsString()).hexdigest()[:32]};"
            f"x64={jax.config.jax_enable_x64};matmul_precision={jax.config.jax_default_matmul_precision}")
