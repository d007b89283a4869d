"""Dynamic batching for served models. Imports the top-level errors/gates only.

Dynamic batching (docs/batching.md): the requests a model's clients send at once are merged along their batch
dim into one run of its executable, as Triton's dynamic batcher does, so that a many-core kernel does the work of
many small runs in one."""
