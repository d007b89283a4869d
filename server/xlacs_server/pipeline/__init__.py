"""The compile path through the stages. Imports cache/, compile/, execute/, passes/, unit/, lower/, graph/ only.

As the service composes it (pipeline/compile_path.py): a Compile's graph -> compile unit -> key -> the tiers, or
passes, lowering and XLA -> bound to its weights; and the top-level modules below service.py."""
