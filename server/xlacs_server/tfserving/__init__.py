"""TensorFlow Serving's APIs (gRPC and REST). Imports models/, the top-level errors, and the client's dtypes and protos only.

tensorflow.serving.PredictionService and ModelService over the models of models/, beside the Open Inference
Protocol (inference/) on the daemon's gRPC port, and the REST API's JSON (rest_json.py), so that a TF Serving
client talks to xlacs by changing only the address (docs/tf_serving.md). The daemon (daemon.py) is handed in."""
