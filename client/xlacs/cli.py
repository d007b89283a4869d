"""The `xlacs` command: serve, compile, run, ops, check, health."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import sys
import time

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from xlacs import dtypes
from xlacs.auth import tls_credentials
from xlacs.client import Client
from xlacs.errors import error_details
from xlacs.saved_model import (DEFAULT_SIGNATURE, InvalidInput, SavedModel, SavedModelError, check_inputs,
                               compile_signature)
from xlacs.v1 import xlacs_pb2

DEFAULT_SERVER = "localhost:50051"
COMPILER_SERVICE = xlacs_pb2.DESCRIPTOR.services_by_name["Compiler"].full_name
HEALTH_TIMEOUT_S = 5.0


def parse_feed(text: str) -> tuple[str, tuple]:
    """NAME=DTYPE[d0,d1,...], e.g. x:0=float32[1,224,224,3] (DTYPE[] is a scalar; -1 is a dim known only at
    Execute, docs/dynamic_shapes.md)."""
    name, sep, spec = text.rpartition("=")
    match = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*\[((?:\s*-?[0-9]+\s*,)*\s*(?:-?[0-9]+\s*)?)\]\s*", spec)
    if not sep or not name or not match:
        raise argparse.ArgumentTypeError(f"--feed {text!r} is not NAME=DTYPE[d0,d1,...]")
    try:
        dtype = dtypes.to_numpy(dtypes.parse(match.group(1)))
    except dtypes.UnsupportedDType as e:
        raise argparse.ArgumentTypeError(f"feed {name!r} has {e}") from None
    shape = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    return name, (dtype, shape)


def parse_sizes(text: str) -> tuple[int, ...]:
    """1,2,4,8: the sizes a -1 dim is padded to."""
    try:
        return tuple(int(d) for d in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--bucket-sizes {text!r} is not a list of sizes such as 1,2,4,8") from None


def parse_input(text: str) -> tuple[str, str]:
    name, sep, path = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--input {text!r} is not NAME=FILE.npy")
    return name, path


def _compile(args, client: Client, feeds: dict):
    if not feeds:
        sys.exit("error: give each feed with --feed NAME=DTYPE[d0,...] (or --input NAME=FILE.npy for run)")
    if not args.fetch:
        sys.exit("error: give each output of a GraphDef with --fetch NODE:INDEX")
    executable = client.compile(args.graph, feeds, args.fetch, device=args.device,
                                name=args.name or pathlib.Path(args.graph).stem, dump_graphs=bool(args.dump_graphs),
                                bucket_sizes=args.bucket_sizes, wait_optimized=args.wait_optimized)
    _write_graph_dumps(args, executable)
    return executable


def _write_graph_dumps(args, executable) -> None:
    if args.dump_graphs:
        directory = pathlib.Path(args.dump_graphs)
        directory.mkdir(parents=True, exist_ok=True)
        for label, pbtxt in executable.graph_dumps.items():
            (directory / f"{label}.pbtxt").write_text(pbtxt)


def saved_model_directory(path: str) -> pathlib.Path | None:
    """The SavedModel directory `path` names (the directory, or its saved_model.pb), or None for a GraphDef."""
    path = pathlib.Path(path)
    if path.is_dir():
        return path
    return path.parent if path.name == "saved_model.pb" else None


def _compile_signature(args, client: Client, signature, inputs: dict | None = None):
    """Compiles a signature with its own shapes, where --feed NAME=DTYPE[...] gives none: unknown dims compile into
    buckets (--bucket-sizes). An input of unknown rank takes the shape of its array in `inputs`."""
    shapes = {n: a.shape for n, a in (inputs or {}).items() if n in signature.inputs and
              signature.inputs[n].shape is None}
    for name, (dtype, shape) in args.feed:
        if name in signature.inputs and dtype != signature.inputs[name].dtype:
            raise InvalidInput(f"--feed {name} is {dtype}; signature {signature.key!r} takes "
                               f"{signature.inputs[name].dtype}")
        shapes[name] = shape
    executable = compile_signature(client, signature, shapes, device=args.device,
                                   name=args.name or saved_model_directory(args.graph).resolve().name,
                                   dump_graphs=bool(args.dump_graphs), bucket_sizes=args.bucket_sizes,
                                   wait_optimized=args.wait_optimized)
    _write_graph_dumps(args, executable)
    return executable


def _signature_record(executable) -> dict:
    """The compile record of a SavedModel signature: its inputs and outputs by name, with dtypes and shapes."""
    return {**_compile_record(executable), "signature": executable.signature_key,
            "inputs": {n: {"dtype": str(s.dtype), "shape": list(s.shape)} for n, s in executable.inputs.items()},
            "outputs": {n: {"dtype": str(s.dtype), "shape": list(s.shape) if s.shape is not None else None}
                        for n, s in executable.outputs.items()}}


def _compile_record(executable) -> dict:
    return {"executable_id": executable.id, "cache": executable.cache, "tier": executable.tier,
            "stage_ms": {k: round(v, 3) for k, v in executable.stage_ms.items()},
            "upload": dataclasses.asdict(executable.upload),
            "inputs": executable.input_names, "outputs": executable.output_names}


def cmd_compile(args, client: Client) -> dict:
    directory = saved_model_directory(args.graph)
    if directory is None:
        executable = _compile(args, client, dict(args.feed))
        record = _compile_record(executable)
    else:
        executable = _compile_signature(args, client, SavedModel(directory).signature(args.signature))
        record = _signature_record(executable)
    if not args.json:
        print(f"{executable.id}  cache={executable.cache}  tier={executable.tier}  "
              f"uploaded={executable.upload.uploaded_bytes}B  " +
              "  ".join(f"{k}={v:.1f}ms" for k, v in executable.stage_ms.items()))
    return record


def cmd_run(args, client: Client) -> dict:
    """Outputs by name (fetch, or a signature's output name), each with its file, dtype and shape."""
    inputs = {name: np.load(path, allow_pickle=False) for name, path in args.input}
    directory = saved_model_directory(args.graph)
    if directory is None:
        feeds = {name: (a.dtype, a.shape) for name, a in inputs.items()}
        feeds.update(dict(args.feed))
        executable = _compile(args, client, feeds)
        record = _compile_record(executable)
        start = time.perf_counter()
        outputs = dict(zip(executable.output_names, executable.execute(inputs)))
    else:
        signature = SavedModel(directory).signature(args.signature)
        check_inputs(signature.key, signature.inputs, inputs)
        executable = _compile_signature(args, client, signature, inputs)
        record = _signature_record(executable)
        start = time.perf_counter()
        outputs = executable.execute(inputs)
    execute_ms = (time.perf_counter() - start) * 1e3
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, array in outputs.items():
        path = out_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy")
        np.save(path, array)
        written[name] = {"path": str(path), "dtype": str(array.dtype), "shape": list(array.shape)}
        if not args.json:
            print(f"{name}: {array.dtype}{list(array.shape)} -> {path}")
    return {**record, "outputs": written, "execute_ms": round(execute_ms, 3)}


def cmd_ops(args, client: Client) -> dict:
    ops = client.ops()
    if not args.json:
        for op in ops:
            extra = f"  const inputs: {','.join(op.constant_inputs)}" if op.constant_inputs else ""
            print(f"{op.op:36s} {','.join(op.devices):8s} {','.join(op.dtypes) or 'any'}{extra}")
        print(f"{len(ops)} ops")
    return {"ops": [{"op": o.op, "dtypes": list(o.dtypes), "devices": list(o.devices),
                     "constant_inputs": list(o.constant_inputs), "attrs": list(o.attrs)} for o in ops]}


def cmd_check(args, client: Client) -> dict:
    report = client.check(args.graph, device=args.device)
    unsupported = {u.op: list(u.nodes) for u in report.unsupported}
    if not args.json:
        for op, count in sorted(report.op_histogram.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{count:8d}  {op}{'   UNSUPPORTED' if op in unsupported else ''}")
        for op, nodes in unsupported.items():
            print(f"unsupported: {op}: {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}")
        print(f"{report.node_count} nodes, {len(unsupported)} unsupported op type(s)")
    return {"node_count": report.node_count, "op_histogram": dict(report.op_histogram),
            "unsupported": unsupported, "exit_code": 3 if unsupported else 0}


def cmd_health(args, client: Client) -> dict:
    """The gRPC health status of a service (the Compiler by default); exit code 1 unless it is SERVING."""
    response = health_pb2_grpc.HealthStub(client.channel).Check(
        health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout or HEALTH_TIMEOUT_S)
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    if not args.json:
        print(status)
    return {"service": args.service, "status": status,
            "exit_code": 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1}


SERVER_EXTRA = "the daemon needs: pip install 'xlacs[server]'"


def cmd_serve(args) -> None:
    """The daemon, whose packages (jax, fastapi, redis, ...) are the `server` extra: a client-only install
    (`pip install xlacs`) says what to install rather than fail with a traceback, and so does one whose jax the
    daemon does not support (xlacs_server.jax_versions)."""
    try:
        from xlacs_server.main import serve
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] in ("xlacs", "xlacs_server"):
            raise  # a module of this package is missing: a broken install, not a missing extra
        sys.exit(f"error: xlacs serve: {SERVER_EXTRA} ({e.name} is not installed)")
    except ImportError as e:
        if e.name != "jax":
            raise
        sys.exit(f"error: xlacs serve: {e}")
    serve(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlacs", description="XLA compilation service for TensorFlow graphs")
    sub = parser.add_subparsers(dest="command", required=True)

    def client_command(name, help):
        p = sub.add_parser(name, help=help)
        p.add_argument("--server", default=DEFAULT_SERVER, help="daemon address HOST:PORT")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--timeout", type=float, default=None, help="RPC deadline in seconds")
        p.add_argument("--token", default=os.environ.get("XLACS_TOKEN"),
                       help="bearer token of a daemon with authentication on (default: $XLACS_TOKEN)")
        p.add_argument("--tls", action="store_true", help="connect with TLS, trusting the system's CAs")
        p.add_argument("--tls-ca", default=None, help="connect with TLS, trusting this CA (PEM)")
        p.add_argument("--tls-cert", default=None, help="client certificate (PEM) for mutual TLS, with --tls-key")
        p.add_argument("--tls-key", default=None, help="the client certificate's private key (PEM)")
        return p

    serve = sub.add_parser("serve", help="start the daemon (flags override XLACS_* environment variables)")
    serve.add_argument("--server", default=None, help="HOST:PORT to listen on (default 0.0.0.0:50051)")
    serve.add_argument("--http-port", type=int, default=None, help="dashboard port (default 8080)")
    serve.add_argument("--devices", default=None, help="pin devices, e.g. cpu:0 or gpu:0,gpu:1")
    serve.add_argument("--dump-graphs", default=None, help="write the graph after each pass to DIR as pbtxt")
    serve.add_argument("--workers", type=int, default=None, help="concurrent RPC threads")
    serve.add_argument("--auth-tokens-file", default=None, help="bearer tokens, one per line, re-read when the "
                                                                "file changes; turns authentication on")
    serve.add_argument("--tls-cert-file", default=None, help="serve gRPC over TLS with this certificate (PEM)")
    serve.add_argument("--tls-key-file", default=None, help="the private key of --tls-cert-file (PEM)")
    serve.add_argument("--tls-client-ca-file", default=None, help="mutual TLS: clients need a certificate signed "
                                                                  "by this CA (PEM)")
    serve.add_argument("--redis-url", default=None, help="share compiled executables through this Redis (L2), "
                                                         "e.g. redis://cache:6379/0; needs XLACS_CACHE_SECRET(_FILE)")
    serve.add_argument("--cache-dir", default=None, help="the cache directory without Redis (default ~/.cache/xlacs; "
                                                         "'' for none)")
    serve.add_argument("--cache-secret-file", default=None, help="a file holding the HMAC key of cache entries")
    serve.add_argument("--model-repository", default=None, metavar="DIR", help="serve the models of DIR (Triton's "
                       "layout: DIR/<model>/config.pbtxt, DIR/<model>/<version>/) by name over the Open Inference "
                       "Protocol and TF Serving's APIs (docs/model_repository.md)")
    serve.add_argument("--model-config-file", default=None, metavar="PATH", help="or serve TF Serving's models: the "
                       "ModelServerConfig in protobuf text at PATH (the models.config of tensorflow_model_server "
                       "--model_config_file), each model BASE/<version>/saved_model.pb; reloaded by "
                       "HandleReloadConfigRequest (docs/tf_serving.md)")
    serve.add_argument("--model-base-path", default=None, metavar="BASE", help="or serve one TF Serving model, "
                       "BASE/<version>/saved_model.pb (BASE absolute), as tensorflow_model_server --model_base_path")
    serve.add_argument("--model-name", default=None, metavar="NAME", help="the name of --model-base-path's model "
                       "(default 'default', as TF Serving's)")
    serve.add_argument("--allow-version-labels-for-unavailable-models", action="store_true", help="a new version "
                       "label may name a version that is not loaded yet (at start, none is), as TF Serving's flag")

    for name, help in (("compile", "compile a GraphDef"), ("run", "compile, execute and write .npy outputs")):
        p = client_command(name, help)
        p.add_argument("graph", help="a frozen GraphDef (.pb), or a SavedModel directory")
        p.add_argument("--signature", default=DEFAULT_SIGNATURE,
                       help=f"a SavedModel's signature key (default {DEFAULT_SIGNATURE})")
        p.add_argument("--feed", type=parse_feed, action="append", default=[],
                       help="NAME=DTYPE[d0,d1,...]; a dim of -1 is known only at run time")
        p.add_argument("--bucket-sizes", type=parse_sizes, default=(), metavar="1,2,4,...",
                       help="the sizes -1 dims are padded to (default: powers of two up to the daemon's "
                            "max_bucket_size)")
        p.add_argument("--fetch", action="append", default=[],
                       help="node:index to compute (a GraphDef's; a SavedModel's are its signature's outputs)")
        p.add_argument("--device", default="", help="cpu:0, gpu:1, ... (default: the server's first)")
        p.add_argument("--name", default="", help="a label shown on the dashboard; not part of the executable id")
        p.add_argument("--dump-graphs", default="", metavar="DIR", help="write the graph after each pass as pbtxt")
        p.add_argument("--wait-optimized", action="store_true",
                       help="answer with the optimized program, not a tiered compile's quick one")
        if name == "run":
            p.add_argument("--input", type=parse_input, action="append", default=[], help="NAME=FILE.npy")
            p.add_argument("--out", required=True, help="directory for the outputs")
    client_command("ops", "list the registered op lowerings")
    p = client_command("check", "list a graph's ops and the unsupported ones, without compiling")
    p.add_argument("graph")
    p.add_argument("--device", default="")
    p = client_command("health", f"ask the daemon's gRPC health service (the probe of containers; deadline "
                                 f"{HEALTH_TIMEOUT_S:.0f} s unless --timeout)")
    p.add_argument("--service", default=COMPILER_SERVICE, help="the service to ask about ('' for the server)")
    return parser


COMMANDS = {"compile": cmd_compile, "run": cmd_run, "ops": cmd_ops, "check": cmd_check, "health": cmd_health}


def _credentials(args) -> grpc.ChannelCredentials | None:
    if not (args.tls or args.tls_ca or args.tls_cert):
        return None
    try:
        return tls_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except (OSError, ValueError) as e:
        sys.exit(f"error: TLS: {e}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        cmd_serve(args)
        return 0
    try:
        with Client(args.server, timeout=args.timeout, credentials=_credentials(args), token=args.token) as client:
            record = COMMANDS[args.command](args, client)
    except (SavedModelError, InvalidInput, OSError) as e:  # refused here, before any call: as the daemon would
        message = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) else str(e)
        if args.json:
            print(json.dumps({"error": {"code": grpc.StatusCode.INVALID_ARGUMENT.name, "message": message}}))
        else:
            print(f"error: {message}", file=sys.stderr)
        return 2
    except grpc.RpcError as e:
        if args.json:
            details = error_details(e)
            print(json.dumps({"error": {"code": e.code().name, "message": e.details(), "reason": details.reason,
                                        **details.metadata, "request_id": details.request_id}}))
        else:
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record))
    return record.get("exit_code", 0)


if __name__ == "__main__":
    sys.exit(main())
