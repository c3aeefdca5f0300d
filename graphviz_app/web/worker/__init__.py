"""What runs inside the page's isolated worker processes: evaluate, trace, draw, check.

The server side (the rest of graphviz_app.web) never imports this package: it names the jobs
here by module and function (`graphviz_app.expr.JobRef`), and the worker imports them.
Modules here import torch and the tracer at top level.
"""
