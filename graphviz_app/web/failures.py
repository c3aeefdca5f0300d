"""How the page says why a job gave no result: the message, the offending line, and what to do."""

from __future__ import annotations

import streamlit as st

from . import present
from .results import Failure

__all__ = ["show_failure"]


def show_failure(failure: Failure, *, title: str, retry: str = "press Run to try again") -> None:
    """An error as a message, with the offending line when there is one."""
    st.error(f"**{present.md(title)}.** {present.md(str(failure))}")
    if failure.excerpt:
        st.code(failure.excerpt, language=None)
    if failure.transient:
        st.caption(f"This may pass on a less busy moment: {retry}.")
    elif failure.kind == "overtime" and retry.startswith("press Run"):
        st.caption("Make the program smaller (smaller tensors, fewer loop iterations), then Run.")
