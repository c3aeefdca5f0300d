"""The torch side of memory: measure a step as it runs, forecast it on `meta`, apply a checkpoint plan.

The functions a script calls (`measure`, `forecast`, `largest_batch_for`, `advise_checkpoints`) are in
the public module `graphviz_app.memory`; the predictions themselves are analyses of the graph
(`graphviz_app.analysis.memory`).
"""
