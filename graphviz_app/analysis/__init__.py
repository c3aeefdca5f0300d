"""Analyses of the plain model: each a small module that reads a Graph and returns plain records or a new Graph.

No torch and no drawing: summary, module summary, collapse by module depth and rolled repeats,
gradient report, repeated blocks (loss-accumulation leaks).
"""
