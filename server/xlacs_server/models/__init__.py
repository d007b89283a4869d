"""Served models: a model repository's models and versions, loaded through the compile cache and run by name."""
