"""Recognition cost: the old exhaustive sweep against one lattice search per utterance.

Needs a finished run (the demo corpus, the eval set's features and i-vectors, final.pt,
its word and phone graphs):

    .venv/bin/python benchmarks/bench_decode.py --results results [--exp default] \
        [--set test] [--max-utts 20]

On one core (torch single-threaded), over the same utterances and the same network
outputs, side by side in one run:

* **old**: Kaldi's LatticeFasterDecoder (kaldi-hmm-gmm's C++, ``paravg.decode.reference``)
  searched once per scoring setting: the word grid (LMWT 7-17 × WIP 0, 0.5, 1) and the
  phone graph on the same grid, 66 searches per utterance, as paravg decoded before;
* **new**: one lattice search per utterance and graph (``paravg.decode.search``), the
  lattices written to and read back from Kaldi's text archive form, then the word grid
  and the phone graph's own grid (LMWT 1-10) applied to the lattices.

Printed: CPU seconds and real-time factor (CPU s / audio s) of each part, the new
route's total over the old one, the share of (utterance, setting) pairs whose best
path is the same in both routes (the settings both grids hold), and each route's WER and
PER at its best setting. Targets (issue 22): new/old ≤ 0.1, same best path on ≥ 95 %,
WER and PER within 0.3, search RTF ≤ 0.1 at Kaldi's decode.sh beams.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import kaldiio
import torch

WORD_GRID = (list(range(7, 18)), [0.0, 0.5, 1.0])
PHONE_GRID = (list(range(1, 11)), [0.0])
OLD_PHONE_GRID = WORD_GRID


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--exp", default="default")
    ap.add_argument("--set", default="test")
    ap.add_argument("--max-utts", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    from paravg.corpus.phones import PHONES, SILENCE
    from paravg.decode.decoder import GraphSearch
    from paravg.decode.lattice import read_lattice_archive, writing_lattice_archives
    from paravg.decode.posteriors import utterance_log_posteriors
    from paravg.decode.reference import GraphDecoder
    from paravg.decode.score import collapse, parse_setting, score_kind, setting_key
    from paravg.decode.search import SearchOptions
    from paravg.graph.arpa import phone_sequences
    from paravg.graph.lexicon import read_text
    from paravg.graph.load import load_graph
    from paravg.layout import Layout
    from paravg.nnet.model_file import build_model, load_model_file

    r = Path(args.results).resolve()
    os.chdir(r.parent)  # the run's scp files hold paths relative to its directory
    L = Layout(r.name)
    fd = load_model_file(L.final_model(args.exp))
    model = build_model(fd).eval()
    log_priors = fd["state_dict"]["log_priors"].double()
    feats = kaldiio.load_scp(L.feats_scp(args.set))
    ivecs, period = None, 0
    if model.ivector_dim:
        ivecs = kaldiio.load_scp(L.ivector_scp(args.set))
        period = int(Path(L.ivector_period(args.set)).read_text())
    utts = sorted(feats.keys())[: args.max_utts]
    loglikes, frames = {}, 0
    t0 = time.process_time()
    for u in utts:
        logp = utterance_log_posteriors(
            model, feats[u], None if ivecs is None else ivecs[u], period
        )
        loglikes[u] = (logp.double() - log_priors[None]).numpy()
        frames += len(logp)
    cpu = {"network forward": time.process_time() - t0}
    audio = frames / 100.0
    graphs = {k: load_graph(L.graph_dir(k)) for k in ("words", "phones")}
    grids = {"words": WORD_GRID, "phones": PHONE_GRID}
    old_grids = {"words": WORD_GRID, "phones": OLD_PHONE_GRID}

    old: dict[str, dict] = {k: {} for k in graphs}
    for kind, graph in graphs.items():
        lmwts, wips = old_grids[kind]
        decoder = GraphDecoder(graph, SearchOptions(), wips)
        t0 = time.process_time()
        for u in utts:
            for lm in lmwts:
                for wip in wips:
                    old[kind][(lm, wip)] = old[kind].get((lm, wip), {})
                    old[kind][(lm, wip)][u] = decoder.decode(u, loglikes[u], lm, wip)
        cpu[f"old: {kind} graph, {len(lmwts) * len(wips)} searches each"] = time.process_time() - t0

    new: dict[str, dict] = {k: {} for k in graphs}
    tmp = Path(tempfile.mkdtemp(prefix="bench_decode."))
    for kind, graph in graphs.items():
        search = GraphSearch(graph, SearchOptions())
        t0 = time.process_time()
        lattices = {u: search.lattice(loglikes[u]) for u in utts}
        cpu[f"new: {kind} graph, 1 lattice search each"] = time.process_time() - t0
        t0 = time.process_time()
        with writing_lattice_archives({kind: tmp / f"{kind}.gz"}) as archives:
            for u, lattice in lattices.items():
                archives[kind].write(lattice.kaldi_text(u))
        back = dict(read_lattice_archive(tmp / f"{kind}.gz"))
        cpu[f"new: {kind} lattices written and read back"] = time.process_time() - t0
        lmwts, wips = grids[kind]
        t0 = time.process_time()
        for u, lattice in back.items():
            for setting, links in lattice.best_paths(lmwts, wips).items():
                words = [graph.words[int(w)] for w in lattice.word[links] if w > 0]
                new[kind].setdefault(setting, {})[u] = words
        cpu[f"new: {kind} grid applied ({len(lmwts) * len(wips)} settings)"] = (
            time.process_time() - t0
        )

    refs = {"words": read_text(L.text(args.set))}
    targets = kaldiio.load_scp(L.targets_scp(args.set))
    seqs = phone_sequences((targets[u] for u in utts), PHONES, SILENCE)
    refs["phones"] = {u: collapse(s) for u, s in zip(utts, seqs, strict=True)}
    refs["words"] = {u: refs["words"][u] for u in utts}

    def best_rate(kind, by_setting):
        """The set's own best setting and its rate, scored as rule score scores them."""
        hyps = {
            setting_key(*s): {u: " ".join(h) for u, h in v.items()} for s, v in by_setting.items()
        }
        scores, key, _ = score_kind(refs[kind], hyps, kind == "phones")
        return scores[key]["rate"], parse_setting(key)

    print(f"{len(utts)} utterances of {args.set}, {audio:.1f} s of audio, 1 core, Kaldi's beams")
    print(f"{'part':52s} {'CPU s':>8s} {'RTF':>8s}")
    for name, t in cpu.items():
        print(f"{name:52s} {t:8.2f} {t / audio:8.4f}")
    old_total = sum(t for n, t in cpu.items() if n.startswith("old"))
    new_total = sum(t for n, t in cpu.items() if n.startswith("new"))
    print(f"search and scoring, old {old_total:.1f} s, new {new_total:.1f} s: "
          f"new / old = {new_total / old_total:.3f} (target <= 0.1)")  # fmt: skip
    words_search = cpu["new: words graph, 1 lattice search each"]
    rtf = (cpu["network forward"] + words_search) / audio
    print(f"network + word lattice search: RTF {rtf:.4f} per core (target <= 0.1)")
    for kind in graphs:
        shared = [s for s in new[kind] if s in old[kind]]
        same = sum(new[kind][s][u] == old[kind][s][u] for s in shared for u in utts)
        total = len(shared) * len(utts)
        (old_rate, old_best), (new_rate, new_best) = (
            best_rate(kind, old[kind]),
            best_rate(kind, new[kind]),
        )
        unit = "WER" if kind == "words" else "PER"
        print(
            f"{kind}: same best path on {same}/{total} (utterance, setting) pairs "
            f"({100 * same / total:.1f} %); {unit} old {old_rate:.2f} (LMWT {old_best[0]:g}, "
            f"WIP {old_best[1]:g}), new {new_rate:.2f} (LMWT {new_best[0]:g}, "
            f"WIP {new_best[1]:g})"
        )


if __name__ == "__main__":
    main()
