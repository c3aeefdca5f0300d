"""check_model on a 12-layer GPT-2-shaped model, against torch.autograd.gradcheck(fast_mode=True) per module.

Run: .venv/bin/python benchmarks/bench_model_check.py [--layers 12] [--d 256] [--batch 2] [--tokens 32]

1. clean: `check_model(model, tokens)` with every module call checked (strategy "all"):
   CPU seconds, evaluations, units, verdict.
2. planted: the same model with one wrong custom Function (backward 1.02 x the true one) put
   on `transformer.h.<middle>.mlp.act` by a forward hook: strategy "bisect" (the model, then
   only the children of what failed) and "all"; CPU seconds, and whether the culprit is named.
3. the peer: `torch.autograd.gradcheck(fast_mode=True, check_undefined_grad=False)` once per
   module call, at the same inputs in the same float64 copies (the unit functions `check_model`
   re-runs), on the clean and on the planted model: CPU seconds, the units it fails. On a
   mismatch torch's fast mode computes both whole Jacobians for its message (slow mode): for
   the planted unit here (65,536 input elements at the default sizes) a 65,536 x 65,536
   Jacobian, 34 GB. The benchmark replaces that message with a short one
   (`--peer-messages` keeps torch's own), so what is timed is the detection.

One thread (`torch.set_num_threads(1)`), CPU time (`time.process_time`). Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Any

import torch
import transformers
from timing import cpu_seconds

from graphviz_app.tracing.model_check import check_model
from graphviz_app.tracing.model_check.capture import capture
from graphviz_app.tracing.model_check.units import Budget, Unit


class ScaledIdentity(torch.autograd.Function):
    """The identity whose backward is 1.02 x the incoming gradient: the planted bug."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return 1.02 * g


def gpt2(layers: int, d: int, tokens: int) -> Any:
    config = transformers.GPT2Config(n_layer=layers, n_embd=d, n_head=max(1, d // 64), vocab_size=1000,
                                     n_positions=tokens, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).train()


def gradcheck_per_module(model: Any, ids: torch.Tensor, messages: bool) -> tuple[float, list[str], int]:
    """torch's fast gradcheck on every module call's unit function; CPU s, failing paths, units checked."""
    import torch.autograd.gradcheck as torch_gradcheck

    if not messages:  # the failure message's slow-mode Jacobians: see the module docstring
        torch_gradcheck._run_slow_mode_and_get_error = lambda *a, **k: " (slow-mode Jacobians not computed)"
    with torch.random.fork_rng(devices=[]):
        step, _ = capture(model, (ids,), {})
    failing, checked = [], 0
    start = time.process_time()
    for call in step.calls:
        unit = Unit(call, Budget(None, None))
        leaves = [d.value.clone().requires_grad_() for d in unit.inputs]
        if not leaves:
            continue

        def fn(*xs: torch.Tensor, unit: Unit = unit) -> tuple[torch.Tensor, ...]:
            return tuple(unit(list(xs)))

        checked += 1
        try:
            ok = torch.autograd.gradcheck(fn, tuple(leaves), fast_mode=True, raise_exception=False,
                                           check_undefined_grad=False)
        except Exception:  # noqa: BLE001 - a unit torch's gradcheck cannot take counts as not passed
            ok = False
        if not ok:
            failing.append(call.path or "(model)")
    return time.process_time() - start, failing, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--skip-peer", action="store_true", help="leave torch's gradcheck out")
    parser.add_argument("--peer-messages", action="store_true",
                        help="let torch's gradcheck build its failure messages (whole Jacobians)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = gpt2(args.layers, args.d, args.tokens)
    ids = torch.randint(0, 1000, (args.batch, args.tokens))
    params = sum(p.numel() for p in model.parameters())
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"load average {os.getloadavg()[0]:.1f}, 1 thread")
    print(f"GPT-2-shaped: {args.layers} layers, d={args.d}, {params / 1e6:.1f} M parameters, "
          f"batch {args.batch} x {args.tokens} tokens")
    seconds, clean = cpu_seconds(lambda: check_model(model, ids))
    print(f"clean, all units:   {seconds:6.1f} CPU s, {clean.evaluations} evaluations, {len(clean.verdicts)} units, "
          f"passed={clean.passed}")
    if not args.skip_peer:
        seconds, failing, checked = gradcheck_per_module(model, ids, args.peer_messages)
        print(f"clean, torch.autograd.gradcheck(fast_mode=True) per module: {seconds:6.1f} CPU s, {checked} units, "
              f"fails {failing}")
    middle = args.layers // 2
    handle = model.transformer.h[middle].mlp.act.register_forward_hook(
        lambda module, inputs, out: ScaledIdentity.apply(out))
    target = f"transformer.h.{middle}.mlp.act"
    for strategy in ("bisect", "all"):
        seconds, found = cpu_seconds(lambda s=strategy: check_model(model, ids, strategy=s))
        named = [v.path for v in found.culprits]
        print(f"planted, {strategy + ':':7} {seconds:6.1f} CPU s, {found.evaluations} evaluations, "
              f"culprits {named} (planted in {target}: {'found' if named == [target] else 'NOT found'})")
        print(f"  {str(found).splitlines()[0]}")
    if not args.skip_peer:
        seconds, failing, checked = gradcheck_per_module(model, ids, args.peer_messages)
        inside = [p for p in failing if target.startswith(p) or p == "(model)"]
        print(f"planted, torch.autograd.gradcheck(fast_mode=True) per module: {seconds:6.1f} CPU s, {checked} units, "
              f"fails {len(failing)} ({len(inside)} of them the culprit or around it); "
              f"deepest failing: {max(failing, key=len) if failing else None}")
    handle.remove()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
