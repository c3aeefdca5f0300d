"""`python -m graphviz_app` runs the command line."""

from __future__ import annotations

from .cli.commands import main

raise SystemExit(main())
