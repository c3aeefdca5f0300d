"""Drawing with Graphviz from the plain model: styles, clusters, the gradient overlay, layout engines, files.

Reads only the model and the analyses; never torch.
"""
