"""The web page's library side: launcher, jobs, URL state, gallery and presentation.

`graphviz_app/app.py` is the Streamlit page; it lays out what these modules
compute. Only `widgets` imports Streamlit; only `jobs` (inside the isolated
worker) imports torch.
"""

from __future__ import annotations

__all__: list[str] = []
