"""The seeds' running example as the expression-language and runner tests use it: program, value, gradient."""

from __future__ import annotations

SEED_PROGRAM = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
SEED_VALUE = 38 / 3  # ((0+2)^2+3 + (1+2)^2+3 + (2+2)^2+3) / 3
SEED_GRAD = [4 / 3, 2.0, 8 / 3]  # the seeds' hand gradient 2*(x+2)/3
