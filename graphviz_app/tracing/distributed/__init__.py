"""The torch side of a distributed step: DTensor shards, FSDP units, collectives, DDP buckets, per-rank memory.

Nothing is imported here, so `import graphviz_app.tracing.distributed.X` loads only what X needs.
"""
