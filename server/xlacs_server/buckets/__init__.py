"""Dynamic dimensions, built on the service. Imports service.py, pipeline/ and the layers below them.

Dynamic dimensions (docs/dynamic_shapes.md): a feed whose shape holds -1 compiles into shape buckets. The
unknown dims are padded to the smallest bucket that holds a request's size, each bucket compiles once when an
Execute first needs it (through the normal compile path and cache), and the outputs are sliced back."""
