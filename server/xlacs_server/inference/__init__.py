"""The Open Inference Protocol (KServe v2) over HTTP/REST and gRPC: served models' health, metadata and inference."""

# Triton's extensions xlacs offers, as both transports' server metadata lists them.
EXTENSIONS = ("binary_tensor_data", "model_repository", "model_configuration", "statistics")
