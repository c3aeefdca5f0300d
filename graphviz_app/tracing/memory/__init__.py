"""The torch side of memory: measure a step as it runs, forecast it on `meta`, apply a checkpoint plan.

`graphviz_app.tracing.memory.api` has the functions a script calls (`measure`, `forecast`,
`largest_batch_for`, `advise_checkpoints`); the predictions themselves are analyses of the
graph (`graphviz_app.analysis.memory`).
"""
