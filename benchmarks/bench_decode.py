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

**Memory** (``--memory``; issue 34, R4): one utterance of the eval set tiled to each of
``--minutes`` (features and i-vectors repeated), decoded as rule decode_split decodes a
split (both graphs, lattices written), each in a fresh process whose peak RSS
(``ru_maxrss`` at its end: exact, not sampled) and CPU time are printed per lattice beam,
**before** (every link within the beam held to the end of the utterance, the links
pruned once there: ``PRUNE_INTERVAL = 0``) and **after** ("on the way": pruned every
25 frames as Kaldi's ``PruneActiveTokens`` once past ``PRUNE_ABOVE_LINKS``) side by
side, with the lattice links per frame and the most links the search held::

    .venv/bin/python benchmarks/bench_decode.py --results results --memory \\
        --minutes 1 3 10 --lattice-beams 2 8 [--skip-before-above 3]

**Determinised lattices** (``--determinize [BEAM ...]``; issue 40): the word graph's
raw lattices of the set against the same lattices determinised as the decoder does with
``decode.determinize_lattice`` at each beam: CPU seconds per second of audio of the search,
the determinisation, the scoring (archive read, the LMWT × WIP grid, as rule score) and
the CTM (``steps/get_ctm_conf.sh``'s route at LMWT 10: a raw lattice determinised at the
CTM's beam 5 first, then pruning, word alignment and MBR; :mod:`paravg.decode.ctm`),
archive bytes per second of audio, arcs per frame (the raw lattice's links), the
(utterance, setting) pairs whose best word sequence is the raw lattice's, and the WER::

    .venv/bin/python benchmarks/bench_decode.py --results results --determinize 8 6 4

The release before (no pruning as it goes, the lattice text formatted whole) is measured
the same way with its code first on the path, from outside the checkout::

    git archive 39f5424 paravg | tar -x -C /tmp/old
    cd /tmp && PYTHONPATH=/tmp/old python $REPO/benchmarks/bench_decode.py --memory ...
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kaldiio
import numpy as np
import torch
from _harness import add_run_arguments

WORD_GRID = (list(range(7, 18)), [0.0, 0.5, 1.0])
PHONE_GRID = (list(range(1, 11)), [0.0])
OLD_PHONE_GRID = WORD_GRID
CTM_SETTING = "10_0"  # the CTM's cost measured at LMWT 10, WIP 0 (get_ctm_conf.sh, beam 5)


def trained_run(args):
    """The trained run ``args.results`` names, for decoding ``args.set``: (layout, model,
    log priors, features, i-vectors or None, i-vector period, the first ``max_utts``
    utterances). Changes into the run's parent directory: its scp files hold paths
    relative to it."""
    from paravg.layout import Layout
    from paravg.nnet.model_file import build_model, load_model_file

    r = Path(args.results).resolve()
    os.chdir(r.parent)
    L = Layout(r.name)
    fd = load_model_file(L.final_model(args.exp))
    model = build_model(fd).eval()
    log_priors = fd["state_dict"]["log_priors"].double()
    feats = kaldiio.load_scp(L.feats_scp(args.set))
    ivecs, period = None, 0
    if model.ivector_dim:
        ivecs = kaldiio.load_scp(L.ivector_scp(args.set))
        period = int(Path(L.ivector_period(args.set)).read_text())
    return L, model, log_priors, feats, ivecs, period, sorted(feats.keys())[: args.max_utts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--memory", action="store_true", help="peak RSS per minute of audio")
    ap.add_argument("--minutes", type=float, nargs="+", default=[1.0, 3.0])
    ap.add_argument("--lattice-beams", type=float, nargs="+", default=[2.0, 8.0])
    ap.add_argument(
        "--skip-before-above", type=float, default=3.0,
        help="minutes above which the unpruned 'before' run is skipped (it can need ~1 GB/min)",
    )  # fmt: skip
    ap.add_argument("--memory-job", help=argparse.SUPPRESS)  # the child of --memory
    ap.add_argument(
        "--determinize", type=float, nargs="*", metavar="BEAM",
        help="raw against determinised lattices at these beams (none given: lattice beam 8)",
    )  # fmt: skip
    args = ap.parse_args()
    if args.memory_job:
        return memory_job(json.loads(args.memory_job))
    if args.determinize is not None:
        return determinize_bench(args, args.determinize or [8.0])
    if args.memory:
        return memory(args)
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

    L, model, log_priors, feats, ivecs, period, utts = trained_run(args)
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


def tiled_utterance(results: Path, set_: str, minutes: float, out: Path) -> dict:
    """The set's longest utterance repeated to ``minutes`` of frames, written as a Kaldi
    feats/i-vector scp pair under ``out`` (the i-vector rows repeated at the same period,
    one per ``ivector_period`` frames as the online extractor writes them)."""
    from paravg.layout import Layout

    L = Layout(results.name)
    feats = kaldiio.load_scp(L.feats_scp(set_))
    utt = max(feats, key=lambda u: feats[u].shape[0])
    x = feats[utt]
    frames = int(minutes * 6000)
    reps = -(-frames // len(x))
    long_x = np.concatenate([x] * reps)[:frames]
    out.mkdir(parents=True, exist_ok=True)
    name = f"long{minutes:g}min"
    kaldiio.save_ark(str(out / "feats.ark"), {name: long_x}, scp=str(out / "feats.scp"))
    files = {"feats": str(out / "feats.scp"), "frames": frames}
    if Path(L.ivector_scp(set_)).exists():
        period = int(Path(L.ivector_period(set_)).read_text())
        iv = kaldiio.load_scp(L.ivector_scp(set_))[utt]
        rows = -(-frames // period)
        long_iv = np.concatenate([iv] * (-(-rows // len(iv))))[:rows]
        kaldiio.save_ark(str(out / "ivec.ark"), {name: long_iv}, scp=str(out / "ivec.scp"))
        (out / "period").write_text(f"{period}\n")
        files.update(ivectors=str(out / "ivec.scp"), period=str(out / "period"))
    return files


def memory_job(job: dict) -> None:
    """One split decode (decode_split, both graphs) in this process; print its peak RSS."""
    import paravg.decode.search as search_module
    from paravg.decode.decoder import decode_split
    from paravg.decode.search import SearchOptions

    torch.set_num_threads(1)
    if job["prune_interval"] is not None:
        search_module.PRUNE_INTERVAL = job["prune_interval"]
    out = Path(job["out"])
    start = time.process_time()
    summary = decode_split(
        model_path=job["model"],
        graph_dirs=job["graph_dirs"],
        feats_scp=job["feats"],
        out_path=out / "split.json",
        lattice_paths={k: out / f"{k}.lat.gz" for k in job["graph_dirs"]},
        nj=1,
        job=0,
        opts=SearchOptions(lattice_beam=job["lattice_beam"]),
        ivectors_scp=job.get("ivectors"),
        period_path=job.get("period"),
    )
    cpu = time.process_time() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"peak_mb": peak_mb, "cpu_s": cpu, **summary}))


def memory(args) -> None:
    """Peak RSS and CPU time of a split decode of one long utterance, before and after."""
    import paravg.decode.search as search_module
    from paravg.layout import Layout

    # a paravg without pruning as it goes (the release before, through PYTHONPATH): as is
    interval = getattr(search_module, "PRUNE_INTERVAL", None)
    variants = [("at the end", 0), ("on the way", interval)] if interval else [("as is", None)]

    results = Path(args.results).resolve()
    os.chdir(results.parent)
    L = Layout(results.name)
    tmp = Path(tempfile.mkdtemp(prefix="bench_decode_memory."))
    graph_dirs = {k: L.graph_dir(k) for k in ("words", "phones") if Path(L.graph_dir(k)).is_dir()}
    print(f"one utterance of {args.set} tiled; decode_split on {sorted(graph_dirs)}, 1 core")
    print(f"{'minutes':>7s} {'lattice beam':>12s} {'pruned':>14s} {'peak RSS MB':>11s} "
          f"{'MB/min':>7s} {'CPU s':>7s} {'CPU s/min':>9s} {'links/frame':>11s} "
          f"{'held links':>10s}")  # fmt: skip
    try:
        _memory_rows(args, results, L, tmp, graph_dirs, variants)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the long utterances and their lattices


def _memory_rows(args, results: Path, L, tmp: Path, graph_dirs: dict, variants: list) -> None:
    """One row per (minutes, lattice beam, variant): a child process's split decode."""
    for minutes in args.minutes:
        files = tiled_utterance(results, args.set, minutes, tmp / f"{minutes:g}")
        for beam in args.lattice_beams:
            for label, prune_interval in variants:
                if prune_interval == 0 and minutes > args.skip_before_above:
                    print(f"{minutes:7g} {beam:12g} {label:>14s} {'(skipped)':>11s}")
                    continue
                job = {
                    "model": L.final_model(args.exp),
                    "graph_dirs": graph_dirs,
                    "lattice_beam": beam,
                    "prune_interval": prune_interval,
                    "out": str(tmp / f"{minutes:g}"),
                    **files,
                }
                proc = subprocess.run(
                    [sys.executable, __file__, "--memory-job", json.dumps(job)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                links = r["lattice_links_per_frame"].get("words", 0)
                held = r.get("peak_held_links", {}).get("words", 0)
                print(f"{minutes:7g} {beam:12g} {label:>14s} {r['peak_mb']:11.0f} "
                      f"{r['peak_mb'] / minutes:7.0f} {r['cpu_s']:7.1f} "
                      f"{r['cpu_s'] / minutes:9.1f} {links:11.1f} {held:10d}")  # fmt: skip


def determinize_bench(args, beams: list[float]) -> None:
    """Raw against determinised word lattices of ``args.set`` (see the module doc)."""
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    from paravg.decode.ctm import ctm_conf_spans, read_word_boundary
    from paravg.decode.decoder import GraphSearch
    from paravg.decode.lattice import read_lattice_archive, writing_lattice_archives
    from paravg.decode.posteriors import utterance_log_posteriors
    from paravg.decode.score import lattice_hypotheses, parse_setting, score_kind, setting_key
    from paravg.decode.search import SearchOptions
    from paravg.graph.lexicon import read_text
    from paravg.graph.load import load_graph

    L, model, log_priors, feats, ivecs, period, utts = trained_run(args)
    graph = load_graph(L.graph_dir("words"))
    search = GraphSearch(graph, SearchOptions())
    boundary = read_word_boundary(Path(L.graph_dir("words")) / "phones" / "word_boundary.int")
    refs = read_text(L.text(args.set))
    refs = {u: refs[u] for u in utts}
    lmwts, wips = WORD_GRID
    tmp = Path(tempfile.mkdtemp(prefix="bench_decode_det."))
    frames, cpu_search, raw = 0, 0.0, {}
    for u in utts:
        logp = utterance_log_posteriors(
            model, feats[u], None if ivecs is None else ivecs[u], period
        )
        loglikes = (logp.double() - log_priors[None]).numpy()
        frames += len(loglikes)
        t0 = time.process_time()
        raw[u] = search.lattice(loglikes)
        cpu_search += time.process_time() - t0
    audio = frames / 100.0
    rows = []

    def measure(name, lattices, det_cpu, num_arcs):
        path = tmp / f"{name}.gz"
        t0 = time.process_time()
        with writing_lattice_archives({"a": path}) as archives:
            for u, lat in lattices.items():
                lat.write_kaldi_text(archives["a"], u)
        write_cpu = time.process_time() - t0
        t0 = time.process_time()
        hyps = lattice_hypotheses(
            read_lattice_archive(path, word_level=True), lmwts, wips, graph.words
        )
        score_cpu = time.process_time() - t0
        scores, key, _ = score_kind(refs, hyps, False)
        lmwt, wip = parse_setting(CTM_SETTING)
        t0 = time.process_time()
        for _, lat in read_lattice_archive(path, word_level=True):
            ctm_conf_spans(lat, lmwt, wip, graph.transitions, boundary)
        ctm_cpu = time.process_time() - t0
        rows.append((name, det_cpu, write_cpu, score_cpu, ctm_cpu, path.stat().st_size,
                     num_arcs, hyps, scores[key]["rate"], key))  # fmt: skip

    measure("raw", raw, 0.0, sum(lat.num_links for lat in raw.values()))
    for beam in beams:
        t0 = time.process_time()
        det = {u: search.determinize_with_beam(lat, beam) for u, lat in raw.items()}
        det_cpu = time.process_time() - t0
        measure(f"determinised, beam {beam:g}", det, det_cpu, sum(c.num_arcs for c in det.values()))
    shutil.rmtree(tmp, ignore_errors=True)
    settings = [setting_key(lm, wip) for lm in lmwts for wip in wips]
    print(f"{len(utts)} utterances of {args.set}, {audio:.1f} s of audio, word graph, 1 core")
    print(f"search: {cpu_search:.1f} CPU s, {cpu_search / audio:.4f} s per s of audio")
    print(f"{'lattices':26s} {'det s/s':>8s} {'write s/s':>9s} {'score s/s':>9s} "
          f"{'ctm s/s':>8s} {'score/search':>12s} {'KB/s audio':>10s} {'arcs/frame':>10s} "
          f"{'same best':>9s} {'WER (own best)':>15s}")  # fmt: skip
    for name, det_cpu, write_cpu, score_cpu, ctm_cpu, size, arcs, hyps, wer, key in rows:
        same = sum(hyps[k][u] == rows[0][7][k][u] for k in settings for u in utts)
        print(f"{name:26s} {det_cpu / audio:8.4f} {write_cpu / audio:9.4f} "
              f"{score_cpu / audio:9.4f} {ctm_cpu / audio:8.4f} {score_cpu / cpu_search:12.3f} "
              f"{size / 1024 / audio:10.1f} {arcs / frames:10.2f} "
              f"{100 * same / (len(settings) * len(utts)):8.1f}% {wer:8.2f} ({key})")  # fmt: skip


if __name__ == "__main__":
    main()
