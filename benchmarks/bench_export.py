"""Export to Kaldi, and vosk's decode beside paravg's own decode of the same set.

Usage: .venv/bin/python benchmarks/bench_export.py --workdir WS [--exp default] [--set test]
       [--results results]

``WS`` is a finished pipeline workspace (``results/exp/<exp>/final.pt``, the i-vector
models, the eval set's features and i-vectors), e.g. a tiny run::

    snakemake --configfile tests/pipeline/tiny.yaml --directory WS --cores 2 \\
        results/exp/default/final.pt results/feats/test/feats.scp \\
        results/ivector/test/ivector_online.scp

Times, in one run, on one core: the export (binary and text ``final.mdl``: seconds and
size), vosk's decode of the set's wav files from the exported directory (Kaldi's MFCC,
online i-vectors, nnet3 and lattice decoder: everything from audio), and paravg's decode
of the same graph from its stored features and i-vectors (network + Kaldi FasterDecoder).
Prints the real-time factor of each decode (CPU seconds / audio seconds) and their ratio,
and the agreement of the two decodes. The graph is the workspace's word graph
(``results/graph/words``) if it has one, else the export's phone loop. Every path is the
run's layout's (:class:`paravg.layout.Layout` of ``--results``, the config's ``results``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import wave  # noqa: E402
from pathlib import Path  # noqa: E402

import kaldifst  # noqa: E402, F401  (before kaldi_hmm_gmm)
import kaldiio  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _harness import children_cpu  # noqa: E402

from paravg.export.phone_loop import transition_ids  # noqa: E402
from paravg.export.stage import export_experiment  # noqa: E402
from paravg.export.transition_model import TransitionModel  # noqa: E402
from paravg.export.verify import (  # noqa: E402
    agreement,
    paravg_loglikes,
    reference_decode,
    vosk_decode,
)  # fmt: skip
from paravg.layout import Layout  # noqa: E402
from paravg.nnet.model_file import build_model, load_model_file  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", required=True, type=Path)
    p.add_argument("--exp", default="default")
    p.add_argument("--set", default="test")
    p.add_argument(
        "--results", default="results", help="the run's results directory, relative to WS"
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    os.chdir(args.workdir)  # its scp files name arks relative to it
    L = Layout(args.results)
    model_path = Path(L.final_model(args.exp)).resolve()
    files = {  # the i-vector models of the last EM iteration
        "pca": L.ivector_pca(),
        "ubm": L.ubm(max(L.existing("ubm"))[0]),
        "extractor": L.extractor(max(L.existing("extractor"))[0]),
    }
    graph = Path(L.graph_dir("words")).resolve()
    graph = graph if Path(L.graph_file("words", "HCLG.fst")).is_file() else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for binary in (True, False):
            out = Path(tmp) / ("bin" if binary else "text")
            t0 = time.process_time()
            summary = export_experiment(
                model_path, out, {}, 16000, files, graph_dir=graph, binary=binary
            )
            name = f"export ({'binary' if binary else 'text'})"
            size = f"final.mdl {summary['final_mdl_bytes']} bytes"
            rows.append((name, time.process_time() - t0, size))
        kaldi = Path(tmp) / "bin"
        wavs = dict(
            line.split(maxsplit=1)
            for line in Path(L.data_file(args.set, "wav.scp")).read_text().splitlines()
        )
        audio = 0.0
        for path in wavs.values():
            with wave.open(path) as f:
                audio += f.getnframes() / f.getframerate()
        c0 = children_cpu()
        vosk = vosk_decode(kaldi, wavs)
        vosk_cpu = children_cpu() - c0

        t0 = time.process_time()
        model = build_model(load_model_file(model_path))
        model.eval()
        feats = dict(kaldiio.load_scp(L.feats_scp(args.set)))
        ivs = dict(kaldiio.load_scp(L.ivector_scp(args.set)))
        tm = TransitionModel.from_file(kaldi / "am" / "final.mdl")
        tid2pdf = np.array([pdf for row in transition_ids(tm) for _t, _d, pdf in row])
        ll = {u: paravg_loglikes(model, feats[u], ivs[u], 10) for u in feats}
        ours = reference_decode(ll, tid2pdf, kaldi / "graph" / "HCLG.fst",
                                kaldi / "graph" / "words.txt")  # fmt: skip
        ours_cpu = time.process_time() - t0
    print(f"{len(wavs)} utterances, {audio:.1f} s of audio, graph: {graph or 'phone loop'}\n")
    print(f"{'step':32s} {'CPU s':>8s}  note")
    for name, sec, note in rows:
        print(f"{name:32s} {sec:8.2f}  {note}")
    print(f"{'vosk decode (from audio)':32s} {vosk_cpu:8.2f}  RTF {vosk_cpu / audio:.3f}")
    print(f"{'paravg decode (stored features)':32s} {ours_cpu:8.2f}  RTF {ours_cpu / audio:.3f}")
    print(f"\nvosk / paravg decode time: {vosk_cpu / max(ours_cpu, 1e-9):.2f}x")
    print("agreement (paravg as reference):", agreement(ours, vosk))


if __name__ == "__main__":
    main()
