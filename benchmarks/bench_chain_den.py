"""The chain denominator's cost per output frame at the demo's graph size, against the
cross-entropy TDNN-F's forward + backward on the same frames, in the same run.

Denominator (:mod:`paravg.chain.denominator`: leaky-HMM forward + explicit backward,
float32): a synthetic den graph of the size issue 39 gives for the demo (``--states``
4,000, ``--arcs`` 40,000, ``--pdfs`` 2,000: random arcs, every state with the same number
of arcs out, probabilities normalised per state, initial probabilities by Kaldi's 100
iterations), ``--sequences`` 64 chunks × ``--frames`` 50 output frames (150 input frames
at frame subsampling 3), random nnet outputs. Printed: the median of ``--repeats`` passes
in ms per output frame (the issue's target: ≤ 1 ms on one thread).

Baseline: the TDNN-F of ``config/experiments/model_families.yaml`` (``run_tdnn_7q``-style
at the demo's size) with ``frame_subsampling_factor`` 3 and ``--pdfs`` outputs, forward
with stride 3 over 64 chunks of 150 frames plus its context (40 MFCC + 40 i-vector dims),
log-softmax cross-entropy, backward: what one CE job does per minibatch of the same
output frames. The ratio denominator / TDNN-F is what chain training adds on top of the
network (the numerator is a few states per frame and is not counted).

    .venv/bin/python benchmarks/bench_chain_den.py [--threads 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

THREADS = "1"
if "--threads" in sys.argv:
    THREADS = sys.argv[sys.argv.index("--threads") + 1]
os.environ.setdefault("OMP_NUM_THREADS", THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from _harness import FEAT_DIM, IVEC_DIM, REPO  # noqa: E402  (sys.path: this checkout)


def synthetic_den_graph(states: int, arcs: int, pdfs: int, seed: int = 0):
    from paravg.chain.den_graph import DenominatorGraph
    from paravg.chain.fst_arrays import FstArrays

    rng = np.random.default_rng(seed)
    per_state = arcs // states
    src = np.repeat(np.arange(states), per_state)
    dst = rng.integers(0, states, len(src))
    dst[::per_state] = (np.arange(states) + 1) % states  # a cycle: all states reachable
    prob = rng.random(len(src)) + 0.1
    prob /= np.bincount(src, weights=prob)[src] * 1.0001
    lab = rng.integers(1, pdfs + 1, len(src))
    a = FstArrays(states, 0, src, dst, lab, lab.copy(), -np.log(prob), np.full(states, 9.0))
    return DenominatorGraph.from_arrays(a, pdfs)


def time_it(fn, repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tdnnf_step(pdfs: int, sequences: int, frames: int, device: str):
    from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config
    from paravg.nnet.context import model_context
    from paravg.nnet.model_file import new_model

    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    fam = yaml.safe_load((REPO / "config/experiments/model_families.yaml").read_text())
    model_cfg = resolved_experiments(validate_config(deep_merge(cfg, fam)))["tdnnf"]["model"]
    model_cfg = {**model_cfg, "frame_subsampling_factor": 3}
    model = new_model(model_cfg, FEAT_DIM, IVEC_DIM, pdfs)
    model.init_parameters(seed=0)
    model.to(device).train()
    left, right = model_context(model_cfg)
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(sequences, left + 3 * frames + right, FEAT_DIM, generator=gen).to(device)
    ivec = torch.randn(sequences, IVEC_DIM, generator=gen).to(device)
    labels = torch.randint(0, pdfs, (sequences * frames,), generator=gen).to(device)

    def step():
        model.zero_grad(set_to_none=True)
        out = model(feats, ivec, stride=3)
        assert out.shape[1] == frames, out.shape
        loss = torch.nn.functional.nll_loss(out.reshape(-1, pdfs), labels)
        loss.backward()

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--states", type=int, default=4000)
    p.add_argument("--arcs", type=int, default=40000)
    p.add_argument("--pdfs", type=int, default=2000)
    p.add_argument("--sequences", type=int, default=64)
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from paravg.chain.denominator import den_backward, den_forward

    graph = synthetic_den_graph(args.states, args.arcs, args.pdfs).to(args.device)
    x = 2 * torch.randn(args.frames, args.sequences, args.pdfs, generator=torch.Generator())
    x = x.to(args.device)

    def den_step():
        logz, saved = den_forward(graph, x, 0.1)
        occ = den_backward(graph, saved, 0.1)
        assert torch.isfinite(logz).all() and abs(float(occ[-1].sum()) - args.sequences) < 0.1

    output_frames = args.sequences * args.frames
    den_s = time_it(den_step, args.repeats, args.device)
    ce_s = time_it(
        tdnnf_step(args.pdfs, args.sequences, args.frames, args.device), args.repeats, args.device
    )
    print(
        f"device {args.device}, {torch.get_num_threads()} thread(s); den graph "
        f"{args.states} states, {graph.num_arcs} arcs, {args.pdfs} pdfs; "
        f"{args.sequences} x {args.frames} output frames"
    )
    print(
        f"denominator forward+backward: {den_s:.3f} s, "
        f"{1e3 * den_s / output_frames:.3f} ms per output frame (target <= 1 ms)"
    )
    print(
        f"CE TDNN-F forward+backward:   {ce_s:.3f} s, "
        f"{1e3 * ce_s / output_frames:.3f} ms per output frame"
    )
    print(f"ratio denominator / TDNN-F: {den_s / ce_s:.2f}")


if __name__ == "__main__":
    main()
