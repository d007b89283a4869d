"""xlacs.v1.Compiler: protos in, core calls, protos out."""
import time

from xlacs import dtypes, tensors
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server import version
from xlacs_server.buckets.dynamic import has_unknown_dims
from xlacs_server.buckets.routed import execute_routed
from xlacs_server.daemon import Daemon
from xlacs_server.digest import checked_digest
from xlacs_server.errors import InvalidRequest, LimitExceeded
from xlacs_server.execute.download import download
from xlacs_server.execute.executable import QUICK
from xlacs_server.gates import Gates
from xlacs_server.lower import registry
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.rpc import execute_io


def _sig(s) -> xlacs_pb2.TensorSpec:
    return xlacs_pb2.TensorSpec(name=s.name, dtype=dtypes.from_numpy(s.dtype), shape=s.shape)


def _signature(executable) -> xlacs_pb2.Signature:
    return xlacs_pb2.Signature(inputs=[_sig(s) for s in executable.inputs],
                               outputs=[_sig(s) for s in executable.outputs])


class CompilerServicer(xlacs_pb2_grpc.CompilerServicer):
    def __init__(self, service: Daemon, gates: Gates):
        self.service = service
        self.gates = gates

    def Compile(self, request, context):
        feeds = []
        for f in request.feeds:
            try:
                dtypes.to_numpy(f.dtype)
            except dtypes.UnsupportedDType as e:
                raise InvalidRequest(f"feed {f.name!r} has {e}") from None
            feeds.append((f.name, f.dtype, tuple(f.shape)))
        digest = checked_digest(request.graph_digest, "graph_digest") if request.HasField("graph_digest") else None
        manifest = request.graph_manifest if request.HasField("graph_manifest") else None
        if manifest is not None and digest is None:
            raise InvalidRequest("graph_manifest needs graph_digest: the digest of the GraphDef's bytes it names")
        spec = CompileSpec(request.graph_def, feeds, list(request.fetches), request.device, request.graph_name,
                           digest, manifest, tuple(request.bucket_sizes), request.wait_optimized)
        if has_unknown_dims(feeds):  # compiles into shape buckets when Executes need them (buckets/)
            dynamic, cache, stage_ms = self.gates.compile.run(
                context, lambda call: self.service.dynamic.compile(spec, call.checkpoint, call.slot))
            return xlacs_pb2.CompileResponse(executable_id=dynamic.id, signature=_signature(dynamic),
                                             stage_ms=stage_ms, cache=cache)
        result, dumps = self.gates.compile.run(context, lambda call: (
            self.service.compile(spec, call.checkpoint, call.slot),
            self.service.dump_passes(spec) if request.dump_graphs else []))
        return xlacs_pb2.CompileResponse(executable_id=result.loaded.id, signature=_signature(result.loaded),
                                         stage_ms=result.stage_ms, cache=result.cache,
                                         passes=result.loaded.executable.passes, tier=result.tier,
                                         graph_dumps=[xlacs_pb2.GraphDump(name=n, pbtxt=t) for n, t in dumps])

    def Execute(self, received, context):
        request, contents = received  # the contents apart when read in place (rpc/execute_wire.py)
        with self.service.shared_memory.lease(request.session_id) as lease:  # its regions stay open until it is done
            inputs = execute_io.inputs(request, contents, self.service.resident, lease)
            keep = execute_io.kept(request)
            targets = execute_io.output_targets(request, lease)
            return execute_io.response(*self.gates.execute.run(
                context, lambda call: self._execute(call, request.executable_id, inputs, keep, request.state_id)),
                targets)

    def ExecuteStream(self, request_iterator, context):
        def work(call):  # the gate admits the call before it receives any piece
            first, inputs = execute_io.streamed_inputs(request_iterator, self.service, call.checkpoint)
            return self._execute(call, first.executable_id, inputs, execute_io.kept(first), first.state_id)
        yield from execute_io.streamed_outputs(*self.gates.execute.run(context, work))

    def _execute(self, call, executable_id: str, inputs: dict, keep: dict[str, float], state_id: str):
        """(executable, outputs, execute_ms); a bucket this daemon lacks compiles under the compile gate."""
        return execute_routed(self.service.dynamic, call, executable_id, inputs, lambda spec: self.gates.compile.run(
            call.context, lambda compiling: self.service.compile(spec, compiling.checkpoint, compiling.slot)), keep,
            state_id)

    def ListOps(self, request, context):
        return xlacs_pb2.ListOpsResponse(ops=[
            xlacs_pb2.OpLowering(op=l.op, dtypes=sorted(str(d) for d in l.dtypes or ()), devices=sorted(l.devices),
                                 constant_inputs=l.constant_input_names,
                                 attrs=sorted(l.attrs), platform_overrides=registry.overrides(l.op), module=l.module)
            for l in registry.registrations() if l.platform is None])

    def CheckGraph(self, request, context):
        histogram, unsupported, count = self.gates.compile.run(
            context, lambda call: _in_slot(call, lambda: self.service.check_graph(request.graph_def, request.device)))
        return xlacs_pb2.CheckGraphResponse(
            op_histogram=dict(histogram), node_count=count,
            unsupported=[xlacs_pb2.UnsupportedOp(op=op, nodes=nodes) for op, nodes in sorted(unsupported.items())])

    def GetStats(self, request, context):
        c = self.service.counters
        tiers = [xlacs_pb2.TierStats(**vars(t.stats)) for t in self.service.tiers]
        blob_tiers = [xlacs_pb2.TierStats(**vars(s.stats)) for s in self.service.blobs.stores]
        resident_tensors, resident_bytes = self.service.resident.totals()
        _, regions, region_bytes = self.service.shared_memory.totals()
        states, state_bytes = self.service.states.totals()
        return xlacs_pb2.Stats(
            tiers=tiers, blob_tiers=blob_tiers, received_bytes=c.received(),
            upload_saved_bytes=c.upload_saved_bytes, compiles=c.compiles, executes=c.executes, errors=c.errors,
            bucket_compiles=c.bucket_compiles, padding_elements=c.padding_elements, padded_elements=c.padded_elements,
            resident_tensors=resident_tensors, resident_bytes=resident_bytes,
            shared_memory_regions=regions, shared_memory_bytes=region_bytes,
            states=states, state_bytes=state_bytes,
            uptime_s=time.time() - c.started, version=version.VERSION,
            devices=[xlacs_pb2.Device(name=d.name, platform=d.platform, kind=d.kind) for d in self.service.devices.all])

    def FindMissingBlobs(self, request, context):
        digests = [checked_digest(d, f"digests[{i}]") for i, d in enumerate(request.digests)]
        return xlacs_pb2.FindMissingBlobsResponse(missing=[
            xlacs_pb2.Digest(hash=d.hash, size_bytes=d.size) for d in self.service.find_missing_blobs(digests)])

    def UploadBlobs(self, request_iterator, context):
        # Through the compile gate (no slot): it bounds the uploads in flight, each holding one blob at a time.
        blobs, size = self.gates.compile.run(
            context, lambda call: self.service.upload_blobs(request_iterator, call.checkpoint))
        return xlacs_pb2.UploadBlobsResponse(blobs=blobs, bytes=size)

    def DownloadExecutable(self, request, context):
        limit = self.service.settings.max_graph_nodes
        if len(request.have) > limit:  # as FindMissingBlobs bounds its digests
            raise LimitExceeded(f"DownloadExecutable names {len(request.have)} blobs in have", "max_graph_nodes", limit)
        have = {checked_digest(d, f"have[{i}]") for i, d in enumerate(request.have)}
        loaded = self.service.loaded(request.executable_id)
        if loaded.executable.tier == QUICK:  # the optimized program, admitted as a Compile that waits for it
            self.gates.compile.run(context, lambda call: self.service.tier_up.wait(loaded.executable,
                                                                                   call.checkpoint))
        yield from download(loaded, _signature(loaded), have)

    def GetExecutable(self, request, context):
        loaded = self.service.loaded(request.executable_id)
        e = loaded.executable
        return xlacs_pb2.ExecutableInfo(
            executable_id=loaded.id, graph_name=e.graph_name, device=e.device.name, signature=_signature(loaded),
            stage_ms={**e.stage_ms, **({"prepare": e.prepare.ms} if e.prepare else {})}, passes=e.passes,
            size_bytes=e.size_bytes, hits=e.hits,
            created_unix=e.created, last_used_unix=e.last_used, tier=e.tier)

    def FetchTensors(self, request, context):
        # A copy from the device, as an Execute's outputs: in one of its slots.
        arrays = self.gates.execute.run(context, lambda call: _in_slot(
            call, lambda: self.service.resident.fetch(list(request.handles))))
        response = xlacs_pb2.FetchTensorsResponse()
        for handle, array in zip(request.handles, arrays):
            tensors.fill(response.tensors.add(), handle, array)
        return response

    def FreeTensors(self, request, context):
        count, size = self.service.resident.free(list(request.handles))
        return xlacs_pb2.FreeTensorsResponse(tensors=count, bytes=size)

    def OpenSession(self, request, context, send_response_callback):
        # Non-blocking (marked below): the call stays open while the session lives, holding no gRPC thread.
        shared_memory = self.service.shared_memory
        session_id = shared_memory.open(context.peer(), lambda: send_response_callback(None))
        if not context.add_callback(lambda: shared_memory.close(session_id)):
            shared_memory.close(session_id)  # the call ended already
            return
        send_response_callback(xlacs_pb2.SessionEvent(session_id=session_id))

    OpenSession.experimental_non_blocking = True

    def RegisterSharedMemory(self, request, context):
        self.service.shared_memory.register(request.session_id, request.name, request.key, request.offset,
                                            request.byte_size, context.peer())
        return xlacs_pb2.RegisterSharedMemoryResponse()

    def CreateState(self, request, context):
        variables = execute_io.state_variables(request, self.service.settings.max_input_bytes)
        state = self.service.states.create(variables, self.service.devices.resolve(request.device))
        return xlacs_pb2.CreateStateResponse(state_id=state.id, bytes=state.nbytes, variables=[
            xlacs_pb2.TensorSpec(name=n, dtype=dtypes.from_numpy(a.dtype), shape=a.shape)
            for n, a in state.variables.items()])

    def ReadVariables(self, request, context):
        # A copy from the device, as an Execute's outputs: in one of its slots.
        arrays = self.gates.execute.run(context, lambda call: _in_slot(
            call, lambda: self.service.states.read(request.state_id, list(request.names))))
        response = xlacs_pb2.ReadVariablesResponse()
        for name, array in arrays.items():
            tensors.fill(response.variables.add(), name, array)
        return response

    def DeleteState(self, request, context):
        return xlacs_pb2.DeleteStateResponse(freed_bytes=self.service.states.delete(request.state_id))

    def UnregisterSharedMemory(self, request, context):
        return xlacs_pb2.UnregisterSharedMemoryResponse(
            regions=self.service.shared_memory.unregister(request.session_id, request.name))


def _in_slot(call, work):
    with call.slot():
        return work()
