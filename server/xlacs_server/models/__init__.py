"""Served models, built on the service. Imports buckets/, batching/, service.py and the layers below.

A model repository's models and versions, loaded through the compile cache and run by name; the daemon
(daemon.py) registers the repository at start."""
