"""What runs inside the worker processes for the page and the CLI: evaluate, trace, check, draw, measure memory.

Each use case is composed once, as a library function returning frozen records:
`programs.trace_program` (a program to a graph), `checking.check_program` (check a
program's gradients). The jobs the page (`page`, `pictures`, `saved`, `page_memory`)
and the CLI (`cli`) run are thin wrappers that return plain data. Nothing outside
this package imports it: the page's server and the CLI name its jobs by reference
(`graphviz_app.runner.JobRef`), and only a worker imports them (they load torch).
"""
