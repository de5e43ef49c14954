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

Jobs (``--jobs``, on by default): a whole chain train job (:func:`paravg.train_job.train_one_job`
on a chain archive: buffer shuffle, merge, the chain TDNN-F of ``config/experiments/chain.yaml``
with its ``output-xent`` branch, numerator, denominator, NG-SGD update) against a whole
cross-entropy job of the README's TDNN-F (``model_families.yaml``'s ``tdnnf``, full frame
rate, frame egs, minibatch 256), both on synthetic archives at the demo's dims (40 MFCC +
40 i-vector dims, 40 phones, so 80 chain pdfs by the monophone chain tree, its phone LM
and den graph from random phone sequences): output frames trained per second, and input
(10-ms) frames per second, the job's wall time on ``--threads`` threads.

    .venv/bin/python benchmarks/bench_chain_den.py [--threads 1] [--device cpu|cuda] [--no-jobs]
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


def experiment_model(configfile: str, name: str) -> dict:
    """The resolved ``model`` of experiment ``name`` of an experiment config file."""
    from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config

    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    over = yaml.safe_load((REPO / configfile).read_text())
    return resolved_experiments(validate_config(deep_merge(cfg, over)))[name]["model"]


def chain_archive(directory, model_cfg: dict, num_phones: int, num_egs: int, frames: int):
    """``num_egs`` chain egs of ``frames`` input frames cut from random utterances (phone
    runs of 3–12 frames, features the phone's one-hot plus noise), with the egs context
    of ``model_cfg``, their supervision table, and the chain setup in ``chain/``."""
    from paravg.chain.prepare import archive_supervision, load_chain, prepare_chain
    from paravg.chain.train import chain_options
    from paravg.egs.archive import ArchiveMeta, ArchiveWriter
    from paravg.nnet.context import egs_context_of

    rng = np.random.default_rng(0)
    targets, feats = {}, {}
    per_utt = 4
    for u in range(-(-num_egs // per_utt)):
        t = np.repeat(rng.integers(0, num_phones, 200), rng.integers(3, 13, 200))
        t = t[: per_utt * frames + 30]
        targets[f"u{u}"] = t
        x = rng.normal(0, 0.5, (len(t), FEAT_DIM)).astype(np.float32)
        x[np.arange(len(t)), t % FEAT_DIM] += 1.0
        feats[f"u{u}"] = x
    prepare_chain(targets.values(), num_phones, directory / "chain")
    left, right = egs_context_of(model_cfg)
    rows = [(u, i * frames) for u in targets for i in range(per_utt)][:num_egs]
    meta = ArchiveMeta(len(rows), frames, left, right, FEAT_DIM, IVEC_DIM, "float16")
    prefix = directory / "egs.0"
    with ArchiveWriter(prefix, meta) as w:
        for i, (u, s) in enumerate(rows):
            idx = np.clip(np.arange(s - left, s + frames + right), 0, len(targets[u]) - 1)
            w.arrays["feats"][i] = feats[u][idx].astype(np.float16)
            w.arrays["labels"][i] = targets[u][s : s + frames]
            w.arrays["weights"][i] = 1.0
            w.arrays["ivectors"][i] = rng.standard_normal(IVEC_DIM)
        w.set_keys([f"{u}-{s}" for u, s in rows])
    keys = [f"{u}-{s}" for u, s in rows]
    _, sup_opts = chain_options(model_cfg)
    table = archive_supervision(
        keys, [frames] * len(keys), targets, load_chain(directory / "chain"), sup_opts
    )
    table.save(prefix)
    return prefix


def job_rates(threads: int, chain_egs: int, ce_egs: int) -> None:
    """Output and input frames per second of a chain job and a CE TDNN-F job."""
    import tempfile
    from pathlib import Path

    from _harness import write_archive

    from paravg.egs.loader import EgsArchive
    from paravg.nnet.context import model_context
    from paravg.nnet.model_file import new_model
    from paravg.train_job import JobSpec, train_one_job

    chain_cfg = experiment_model("config/experiments/chain.yaml", "chain_tdnnf")
    ce_cfg = experiment_model("config/experiments/model_families.yaml", "tdnnf")
    phones, frames, f = 40, 150, 3
    ngsgd = {"enabled": True}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "chain_egs").mkdir()
        prefix = chain_archive(d / "chain_egs", chain_cfg, phones, chain_egs, frames)

        def timed_job(cfg, num_outputs, prefix, minibatch, frame):
            """One NG-SGD job of a fresh model (seed 0) of ``cfg``: (seconds, stats)."""
            model = new_model(cfg, FEAT_DIM, IVEC_DIM, num_outputs)
            model.init_parameters(seed=0)
            spec = JobSpec(1, 0, 1e-3, minibatch, 2.0, frame, 5000, ngsgd=ngsgd)
            t0 = time.perf_counter()
            stats = train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
            return time.perf_counter() - t0, stats

        chain_s, stats = timed_job(chain_cfg, 2 * phones, prefix, 32, 0)
        out = stats["chain"]["frames"]
        rows.append(("chain TDNN-F (f = 3, 150-frame chunks, minibatch 32)", chain_s, out, f * out))
        left, right = model_context(ce_cfg)
        write_archive(d / "ce.0", ce_egs, left, right)
        ce_s, stats = timed_job(ce_cfg, phones, d / "ce.0", 256, 3)
        out = stats["frames"]  # one output frame per input frame
        rows.append(("CE TDNN-F (f = 1, frame egs, minibatch 256)", ce_s, out, out))
    print(f"\njobs, {threads} thread(s), the job's wall time:")
    print("| job | seconds | output frames | output frames/s | input frames/s |")
    print("|---|---|---|---|---|")
    for name, sec, out, inp in rows:
        print(f"| {name} | {sec:.2f} | {out:.0f} | {out / sec:.0f} | {inp / sec:.0f} |")
    (_, c_s, c_out, c_in), (_, e_s, e_out, e_in) = rows
    print(
        f"chain / CE: output frames/s {c_out / c_s / (e_out / e_s):.2f}, "
        f"input frames/s {c_in / c_s / (e_in / e_s):.2f}"
    )


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
    p.add_argument("--no-jobs", dest="jobs", action="store_false", help="skip the job table")
    p.add_argument("--chain-egs", type=int, default=192, help="chain egs of the chain job")
    p.add_argument("--ce-egs", type=int, default=4096, help="frame egs of the CE job")
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
    if args.jobs and args.device == "cpu":
        job_rates(args.threads, args.chain_egs, args.ce_egs)


if __name__ == "__main__":
    main()
