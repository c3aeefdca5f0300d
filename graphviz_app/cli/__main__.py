"""`python -m graphviz_app.cli` runs the command line."""

from __future__ import annotations

import sys

from .commands import main

if __name__ == "__main__":
    sys.exit(main())
