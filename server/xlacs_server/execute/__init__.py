"""Stage 6: the PJRT devices and running compiled executables on them."""
