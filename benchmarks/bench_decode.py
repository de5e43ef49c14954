"""Decoding speed on the demo graph: graph-build time and real-time factor per core.

Needs a finished run (the demo corpus, the eval set's features and i-vectors, final.pt):

    .venv/bin/python benchmarks/bench_decode.py --results results [--exp default] [--set test]

Builds the word and phone graphs from the run's training data into a temporary directory
(timed), then decodes the eval set on one core (torch and the decoder single-threaded),
one search per utterance at LMWT = 1/acoustic_scale, WIP = 0, and prints per stage the
real-time factor RTF = CPU seconds / seconds of audio (frames × 10 ms): the network's
forward pass, the lattice-faster search at Kaldi's decode.sh beams (beam 15, lattice beam
8), at beam 8, and at lattice beam 2 (only the best path is kept: how many utterances get
the same best path as at Kaldi's beams is printed beside), side by side. Target:
network + search ≤ 0.1 per core. The scoring sweep (LMWT × WIP settings) costs one
search per setting; its RTF is the search RTF times the number of settings.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import kaldiio
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--exp", default="default")
    ap.add_argument("--set", default="test")
    ap.add_argument("--max-utts", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    from paravg.decode.decoder import DecodeOptions, GraphDecoder
    from paravg.decode.posteriors import utterance_log_posteriors
    from paravg.graph.build import build_demo_word_graph, build_phone_graph
    from paravg.graph.load import load_graph
    from paravg.nnet.tdnn import build_model, load_model_file

    r = Path(args.results).resolve()
    os.chdir(r.parent)  # the run's scp files hold paths relative to its directory
    r = Path(r.name)
    tmp = Path(tempfile.mkdtemp(prefix="bench_decode."))
    t0 = time.perf_counter()  # wall: ARPA -> G runs in a subprocess
    build_demo_word_graph(r / "demo/train/text", r / "demo/train/phone_ctm", tmp / "words")
    t_words = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_phone_graph(r / "data/train/targets.scp", tmp / "phones")
    t_phones = time.perf_counter() - t0

    fd = load_model_file(r / "exp" / args.exp / "final.pt")
    model = build_model(fd).eval()
    log_priors = fd["state_dict"]["log_priors"].double()
    feats = kaldiio.load_scp(str(r / "feats" / args.set / "feats.scp"))
    ivecs, period = None, 0
    if model.ivector_dim:
        ivecs = kaldiio.load_scp(str(r / "ivector" / args.set / "ivector_online.scp"))
        period = int((r / "ivector" / args.set / "ivector_period").read_text())
    utts = sorted(feats.keys())[: args.max_utts]
    loglikes, frames = {}, 0
    t0 = time.process_time()
    for u in utts:
        logp = utterance_log_posteriors(
            model, feats[u], None if ivecs is None else ivecs[u], period
        )
        loglikes[u] = (logp.double() - log_priors[None]).numpy()
        frames += len(logp)
    t_nnet = time.process_time() - t0
    audio = frames / 100.0
    rows = [("network forward", t_nnet)]
    same: dict[str, int] = {}
    graph = load_graph(tmp / "words")
    best = {}
    for beam, lattice_beam in ((15.0, 8.0), (8.0, 8.0), (15.0, 2.0)):
        decoder = GraphDecoder(graph, DecodeOptions(beam=beam, lattice_beam=lattice_beam), [0.0])
        t0 = time.process_time()
        hyps = {u: decoder.decode(u, loglikes[u], 10, 0.0) for u in utts}
        name = f"search, word graph, beam {beam:g}, lattice beam {lattice_beam:g}"
        rows.append((name, time.process_time() - t0))
        best.setdefault("kaldi", hyps)
        same[name] = sum(hyps[u] == best["kaldi"][u] for u in utts)
    phones = GraphDecoder(load_graph(tmp / "phones"), DecodeOptions(), [0.0])
    t0 = time.process_time()
    for u in utts:
        phones.decode(u, loglikes[u], 10, 0.0)
    rows.append(("search, phone graph, beam 15", time.process_time() - t0))

    print(f"graph build (wall s): words {t_words:.2f}, phones {t_phones:.2f}")
    print(f"decoded {len(utts)} utterances, {audio:.1f} s of audio, 1 core")
    print(f"{'stage':50s} {'CPU s':>8s} {'RTF':>8s} {'vs network':>11s}  best path as Kaldi's")
    for name, t in rows:
        note = f"{same[name]}/{len(utts)}" if name in same else ""
        print(f"{name:50s} {t:8.2f} {t / audio:8.4f} {t / max(t_nnet, 1e-9):11.2f}  {note}")
    total = t_nnet + rows[1][1]
    print(f"network + word search at Kaldi defaults: RTF {total / audio:.4f} (target <= 0.1)")


if __name__ == "__main__":
    main()
