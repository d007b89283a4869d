"""Stage 6: devices, executables, the execute path. Imports unit/ and the top-level modules only.

The PJRT devices, the loaded executables (loaded.py) and their runs (runner.py), in the daemon or in workers."""
