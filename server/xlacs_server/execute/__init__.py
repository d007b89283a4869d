"""Stage 5: the PJRT devices and running compiled executables on them."""
