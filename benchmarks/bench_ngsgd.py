"""NG-SGD step time against plain SGD, measured side by side in one run.

Usage: .venv/bin/python benchmarks/bench_ngsgd.py [--steps 40] [--rounds 5] [--threads 1]
       [--device cpu|cuda] [--cases mlp,kaldi650,tdnn]

One *step* is what a training job does per minibatch: forward, loss = −Σ log p(label)
(summed, as Kaldi), backward, ``delta(lr)`` of every affine component, and adding the
steps to the parameters. The same model (same weights, same minibatches) runs once with
plain :class:`paravg.nnet.affine.Affine` components and once with
:class:`paravg.nnet.ng_affine.NaturalGradientAffine` (Kaldi's defaults: rank_in 20, rank_out
80, update_period 4). Each arm is warmed up past the preconditioners' initialisation and
their first 11 updating calls, then timed over ``--steps`` steps (a multiple of the
update period, so updating and non-updating calls are in their steady-state mix); the
arms alternate for ``--rounds`` rounds and each row reports the median. Target: NG/plain
<= 1.3.

Cases (add one by writing a ``Case`` and listing it in ``CASES``):

* ``mlp``: a stack shaped like the default config's model, 300 (= 5·40 + 100) → 4 × 256
  (ReLU) → 40, minibatch 256 rows;
* ``kaldi650``: one Kaldi-size layer 650 → 650, minibatch 512 rows;
* ``tdnn``: the project's TDNN (paravg.nnet.tdnn) built from config/config.yaml's
  ``model`` section, 40-dim features + 100-dim i-vector, 40 targets, minibatch 256 egs of
  one output frame (as ``paravg.train_job``), so the layers see 256 × (frames they need)
  rows.
* ``tdnn_full``: the same TDNN computing every layer at every position of the window
  (``TdnnModel.forward_full_window``, how it ran before it followed Kaldi's compiler):
  the baseline of the ``tdnn`` row (its NG layers see 11/9/7/1/1 rows per eg, not
  11/9/3/1/1).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from _harness import REPO
from torch import nn

from paravg.io import atomic_path
from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.ng_affine import make_affine_factory

TARGET_RATIO = 1.3
LR = 1e-4

AffineFactory = Callable[..., Affine]
# A built case: the model, its affine components, and a function that runs the forward
# pass of minibatch i and returns loss = -F.
Built = tuple[nn.Module, list[Affine], Callable[[int], torch.Tensor]]


@dataclass
class Case:
    name: str
    description: str
    build: Callable[[AffineFactory, torch.device, torch.Generator], Built]


def _loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits, labels, reduction="sum")


def build_stack(
    dims: list[int], rows: int, num_batches: int = 4
) -> Callable[[AffineFactory, torch.device, torch.Generator], Built]:
    def build(factory: AffineFactory, device: torch.device, gen: torch.Generator) -> Built:
        layers = [factory(a, b, 0.75) for a, b in itertools.pairwise(dims)]
        for layer in layers:
            layer.init_kaldi(gen)
        model = nn.ModuleList(layers).to(device)
        xs = [torch.randn(rows, dims[0], generator=gen).to(device) for _ in range(num_batches)]
        ys = [torch.randint(0, dims[-1], (rows,), generator=gen).to(device) for _ in xs]

        def forward(i: int) -> torch.Tensor:
            h = xs[i % num_batches]
            for j, layer in enumerate(layers):
                h = layer(h)
                if j + 1 < len(layers):
                    h = torch.relu(h)
            return _loss(h, ys[i % num_batches])

        return model, layers, forward

    return build


def build_tdnn(
    factory: AffineFactory,
    device: torch.device,
    gen: torch.Generator,
    num_batches: int = 4,
    full_window: bool = False,
) -> Built:
    from paravg.nnet.tdnn import TdnnModel

    with open(REPO / "config" / "config.yaml") as f:
        model_cfg = yaml.safe_load(f)["model"]
    feat_dim, ivector_dim, num_targets, batch = 40, 100, 40, 256
    model = TdnnModel(model_cfg, feat_dim, ivector_dim, num_targets, factory)
    model.init_parameters(seed=0)
    with torch.no_grad():  # a non-zero output layer, so every layer gets a real gradient
        model.output.weight.normal_(0.0, 0.05, generator=gen)
    model.to(device)
    width = model.left_context + 1 + model.right_context
    feats = [
        torch.randn(batch, width, feat_dim, generator=gen).to(device) for _ in range(num_batches)
    ]
    ivecs = [torch.randn(batch, ivector_dim, generator=gen).to(device) for _ in range(num_batches)]
    labels = [torch.randint(0, num_targets, (batch,), generator=gen).to(device) for _ in feats]

    run = model.forward_full_window if full_window else model

    def forward(i: int) -> torch.Tensor:
        k = i % num_batches
        logp = run(feats[k], ivecs[k])[:, 0]
        return -logp.gather(-1, labels[k].unsqueeze(-1)).sum()

    return model, model.components(), forward


CASES = {
    "mlp": Case("mlp", "300→4×256→40, N=256", build_stack([300, 256, 256, 256, 256, 40], 256)),
    "kaldi650": Case("kaldi650", "650→650, N=512", build_stack([650, 650], 512)),
    "tdnn": Case("tdnn", "TdnnModel (config.yaml), 256 egs", build_tdnn),
    "tdnn_full": Case(
        "tdnn_full",
        "the same, every layer at every position (before)",
        lambda factory, device, gen: build_tdnn(factory, device, gen, full_window=True),
    ),
}


def train_steps(
    comps: list[Affine], forward: Callable[[int], torch.Tensor], start: int, n: int
) -> None:
    for i in range(start, start + n):
        for comp in comps:
            comp.weight.grad = None
            comp.bias.grad = None
        forward(i).backward()
        deltas = [comp.delta(LR) for comp in comps]
        with torch.no_grad():
            for comp, (dw, db) in zip(comps, deltas, strict=True):
                comp.weight.add_(dw)
                comp.bias.add_(db)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clock(device: torch.device) -> float:
    """CPU time of this process on the CPU (robust to other jobs on a shared machine;
    with --threads 1 it is the step's cost), wall time on a GPU (after a sync)."""
    return time.process_time() if device.type == "cpu" else time.perf_counter()


def time_case(case: Case, device: torch.device, steps: int, rounds: int, warmup: int) -> dict:
    arms = {
        "plain": plain_affine_factory,
        "ngsgd": make_affine_factory({"enabled": True}),
    }
    built = {}
    for name, factory in arms.items():
        built[name] = case.build(factory, device, torch.Generator().manual_seed(0))
        _, comps, forward = built[name]
        train_steps(comps, forward, 0, warmup)
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in arms}
    pos = warmup
    for _ in range(rounds):
        for name in arms:
            _, comps, forward = built[name]
            sync(device)
            t0 = clock(device)
            train_steps(comps, forward, pos, steps)
            sync(device)
            times[name].append((clock(device) - t0) / steps)
        pos += steps
    ratios = [n / p for n, p in zip(times["ngsgd"], times["plain"], strict=True)]
    return {
        "case": case.name,
        "what": case.description,
        "device": str(device),
        "plain_ms": 1e3 * statistics.median(times["plain"]),
        "ngsgd_ms": 1e3 * statistics.median(times["ngsgd"]),
        "ratio": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="timed steps per round (multiple of 4)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--warmup", type=int, default=16, help="untimed steps (>= 11 + 1 update period)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated of {list(CASES)}")
    ap.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rows = [
        time_case(CASES[c], device, args.steps, args.rounds, args.warmup)
        for c in args.cases.split(",")
    ]
    print(
        f"NG-SGD vs plain SGD step time ({device}, {args.threads} thread(s), "
        f"median of {args.rounds} rounds x {args.steps} steps; target ratio <= {TARGET_RATIO})"
    )
    print(f"{'case':<10} {'what':<34} {'plain ms':>9} {'ngsgd ms':>9} {'ratio':>6}")
    for r in rows:
        flag = "" if r["ratio"] <= TARGET_RATIO else "  (above target)"
        print(
            f"{r['case']:<10} {r['what']:<34} {r['plain_ms']:9.2f} {r['ngsgd_ms']:9.2f} "
            f"{r['ratio']:6.2f}{flag}"
        )
    print("ms = CPU time per step (process time) on the CPU, wall time on a GPU; ratio = median")
    print("over rounds of NG/plain measured back to back.")
    if args.json:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
