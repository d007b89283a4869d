"""TensorFlow Serving's APIs (gRPC and REST) over models/. Imports models/ and the top-level modules only."""
