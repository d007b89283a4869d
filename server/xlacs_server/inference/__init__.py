"""The Open Inference Protocol (KServe v2) over HTTP/REST and gRPC: served models' health, metadata and inference."""
