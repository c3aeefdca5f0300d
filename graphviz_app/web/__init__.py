"""The web page: the Streamlit script, the parts of the page it lays out, and the library side they call.

`app.py` is the Streamlit script (the sidebar, the editor, the uploads, `main`). The parts of the
page it lays out draw with Streamlit: `page_work` (the worker processes and the shared cache of
results), `result_view` (the graph, downloads, modules, memory, values), `check_panel`,
`compare_view`, `links` (the address bar as a link), `failures` and `widgets` (the page's own
components). Everything else computes without Streamlit: URL state, the gallery, presentation, the
fair runner, and `service`, which runs each job in an isolated worker, the only place torch runs.
"""

from __future__ import annotations

__all__: list[str] = []
