"""TensorFlow Serving's APIs (gRPC and REST) over the models of models/.

tensorflow.serving.PredictionService and ModelService beside the Open Inference Protocol (inference/) on the daemon's
gRPC port, and the REST API (/v1: rest.py, its JSON in rest_json.py) on the dashboard's, so that a TF Serving client
talks to xlacs by changing only the address (docs/tf_serving.md). Imports models/, the top-level errors, and the
client's dtypes, protos and wire helpers only; the daemon (daemon.py) and the HTTP front end's pieces are handed in."""
