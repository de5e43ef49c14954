"""vosk (Kaldi's own online decoder) against paravg on one eval set of a finished run.

Usage: .venv/bin/python benchmarks/bench_vosk_agreement.py --workdir WS [--exp default]
       [--set test] [--results results]

``WS`` is a finished workspace whose experiment was decoded (``results/exp/<exp>/decode/
<set>/scores.json``), e.g. the README's demo run (``--workdir .``). Three comparisons, each
the identical hypotheses and the word error rate between the two, plus each side's WER
against the reference text:

1. *as a user sees it*: paravg's own decoder at the LMWT its scoring chose, WIP 0, the eval
   set's i-vectors (online as in training, carried from one utterance of a speaker to the
   next), dithered features; against vosk on ``results/exp/<exp>/kaldi`` with
   ``--acoustic-scale`` = 0.9 / LMWT (vosk scales the graph by 0.9), its own dither and
   its own per-utterance i-vectors;
2. *the export, exactly*: dither 0 on both sides, paravg's network given the i-vectors vosk
   computes (``paravg.export.verify.vosk_online_ivectors``), Kaldi's FasterDecoder at graph
   scale 0.9; every hypothesis should agree;
3. the same as 2 with the eval set's training-style i-vectors: what the i-vector regime
   alone changes;
4. the same with online i-vectors that start afresh at every utterance (Kaldi's
   ``ivector-extract-online2`` with each utterance its own speaker: what an online decoder
   without speaker adaptation, vosk or ``online2-wav-nnet3-latgen-faster`` per utterance,
   computes, but updated every ``ivector.period`` frames as in training);
5. the same with the training data's pseudo-speakers (``ivector.utts_per_spk_max``
   utterances of a speaker, in order): the regime the network was trained in;
6. as 1, with the eval set's i-vectors extracted per utterance (``ivector.eval_per_utt:
   true``): paravg's decoder (:class:`paravg.decode.reference.GraphDecoder`, the decode
   rule's) on the set's dithered features, against vosk as in 1.

vosk's hypotheses are cached in ``WS/bench_vosk_agreement/`` per ``final.pt`` checksum,
set and setting (vosk takes minutes on these models).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import kaldifst  # noqa: E402, F401  (before kaldi_hmm_gmm)
import kaldiio  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _harness import wer  # noqa: E402

from paravg.audio import AudioReader  # noqa: E402
from paravg.data import read_data_dir  # noqa: E402
from paravg.decode.posteriors import utterance_log_posteriors  # noqa: E402
from paravg.decode.reference import GraphDecoder  # noqa: E402
from paravg.decode.search import SearchOptions  # noqa: E402
from paravg.export.phone_loop import transition_ids  # noqa: E402
from paravg.export.stage import export_experiment  # noqa: E402
from paravg.export.transition_model import TransitionModel  # noqa: E402
from paravg.export.verify import (  # noqa: E402
    VOSK_GRAPH_SCALE,
    agreement,
    paravg_loglikes,
    reference_decode,
    vosk_decode,
    vosk_online_ivectors,
)
from paravg.features import MfccOptions, compute_mfcc  # noqa: E402
from paravg.graph.load import load_graph  # noqa: E402
from paravg.ivector import ubm  # noqa: E402
from paravg.ivector.data import pseudo_speakers  # noqa: E402
from paravg.ivector.extractor import IvectorExtractor  # noqa: E402
from paravg.ivector.features import IvectorFeaturePipeline  # noqa: E402
from paravg.ivector.online import OnlineIvectorOptions, extract_speaker  # noqa: E402
from paravg.layout import Layout  # noqa: E402
from paravg.nnet.model_file import build_model, load_model_file  # noqa: E402


def cached_vosk(kaldi: Path, wavs: dict[str, str], key: str) -> tuple[dict[str, str], float]:
    """vosk's hypotheses on ``kaldi`` (cached under ``key``) and the seconds it took (0 if
    cached)."""
    cache = Path("bench_vosk_agreement") / f"{key}.json"
    if cache.exists():
        return json.loads(cache.read_text()), 0.0
    t0 = time.time()
    hyps = vosk_decode(kaldi, wavs)
    cache.parent.mkdir(exist_ok=True)
    cache.write_text(json.dumps(hyps, indent=1))
    return hyps, time.time() - t0


def online_ivectors(spk2utt, feats, system, utts_per_spk: int) -> dict[str, np.ndarray]:
    """Training-style online i-vectors (period rows, speaker state carried in order) with
    every speaker cut into pseudo-speakers of at most ``utts_per_spk`` utterances."""
    pipeline, gmm, extractor, opts = system
    out = {}
    for utts in pseudo_speakers(spk2utt, utts_per_spk).values():
        pairs = ((u, feats[u]) for u in utts)
        results = extract_speaker(extractor, gmm, pipeline, pairs, opts)
        out.update((u, res.ivectors) for u, res in results)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", required=True, type=Path)
    p.add_argument("--exp", default="default")
    p.add_argument("--set", default="test")
    p.add_argument(
        "--results", default="results", help="the run's results directory, relative to WS"
    )
    p.add_argument("--parts", default="1,2,3,4,5,6", help="comparisons to run")
    p.add_argument(
        "--utts-per-spk-max", type=int, default=2, help="the run's ivector.utts_per_spk_max"
    )
    args = p.parse_args()
    parts = {int(x) for x in args.parts.split(",")}
    torch.set_num_threads(1)
    os.chdir(args.workdir)  # its scp files name arks relative to it
    L = Layout(args.results)
    files = {  # the i-vector models of the last EM iteration
        "pca": L.ivector_pca(),
        "ubm": L.ubm(max(L.existing("ubm"))[0]),
        "extractor": L.extractor(max(L.existing("extractor"))[0]),
    }
    data = read_data_dir(L.data_dir(args.set))
    text = {
        line.split()[0]: line.split()[1:]
        for line in Path(L.text(args.set)).read_text().splitlines()
    }
    wavs = dict(
        line.split(maxsplit=1)
        for line in Path(L.data_file(args.set, "wav.scp")).read_text().splitlines()
    )
    print(f"{args.exp} / {args.set}: {len(wavs)} utterances\n")
    print(f"{'comparison':52s} {'identical':>10s} {'WER between':>12s} {'WER paravg':>11s} "
          f"{'WER vosk':>9s} {'vosk s':>7s}", flush=True)  # fmt: skip

    def row(name: str, a: dict[str, str], b: dict[str, str], sec: float) -> None:
        s = agreement(a, b)
        print(
            f"{name:52s} {s['identical']:>4d}/{s['utterances']:<5d} "
            f"{s['error_rate_between']:>12.2f} {wer(text, a):>11.2f} {wer(text, b):>9.2f} "
            f"{sec:>7.1f}",
            flush=True,
        )

    final_pt = L.final_model(args.exp)
    digest = hashlib.sha256(Path(final_pt).read_bytes()).hexdigest()[:16]
    key = f"{args.exp}.{args.set}.{digest}"
    system = (
        IvectorFeaturePipeline.load(files["pca"]),
        ubm.DiagGmm.load(files["ubm"]),
        IvectorExtractor.load(files["extractor"]),
        OnlineIvectorOptions(),
    )
    final = load_model_file(final_pt)
    model = build_model(final)
    model.eval()
    period = int(Path(L.ivector_period(args.set)).read_text())

    # 1 and 6: as a user sees it
    if parts & {1, 6}:
        lmwt = float(json.loads(Path(L.decode_scores(args.exp, args.set)).read_text())["lmwt"])
        with tempfile.TemporaryDirectory() as tmp:
            kaldi = Path(tmp) / "kaldi"
            shutil.copytree(L.kaldi_dir(args.exp), kaldi)
            conf = kaldi / "conf" / "model.conf"
            scale = VOSK_GRAPH_SCALE / lmwt
            conf.write_text(
                re.sub(r"--acoustic-scale=\S+", f"--acoustic-scale={scale}", conf.read_text())
            )
            vosk, vosk_s = cached_vosk(kaldi, wavs, f"{key}.as_trained.lmwt{lmwt:g}")
        if 1 in parts:
            hyps = json.loads(Path(L.decode_hyps(args.exp, args.set)).read_text())
            ours: dict[str, str] = hyps["words"][f"{lmwt:g}_0"]
            row(f"1. as trained (LMWT {lmwt:g}): paravg decoder vs vosk", ours, vosk, vosk_s)
        if 6 in parts:
            stored_feats = dict(kaldiio.load_scp(L.feats_scp(args.set)))
            ivs = online_ivectors(data.spk2utt, stored_feats, system, 1)
            log_priors = final["state_dict"]["log_priors"].double()
            decoder = GraphDecoder(load_graph(L.graph_dir("words")), SearchOptions(), [0.0])
            ours = {}
            for u, x in stored_feats.items():
                with torch.no_grad():
                    logp = utterance_log_posteriors(model, x, ivs[u], period).double()
                ll = (logp - log_priors[None, :]).numpy()
                ours[u] = " ".join(decoder.decode(u, ll, lmwt, 0.0))
            row(f"6. as 1, per-utterance i-vectors (LMWT {lmwt:g})", ours, vosk, vosk_s)

    if not parts & {2, 3, 4, 5}:
        return
    # 2-5: dither 0, paravg's network + FasterDecoder on the export's graph
    mfcc = MfccOptions(dither=0.0)
    reader = AudioReader(data, 16000)
    audio = {u: reader(u) for u in data.utterances}
    feats = {u: compute_mfcc(audio[u], mfcc) for u in data.utterances}
    stored = dict(kaldiio.load_scp(L.ivector_scp(args.set)))
    with tempfile.TemporaryDirectory() as tmp:
        kaldi = Path(tmp) / "kaldi"
        export_experiment(
            final_pt, kaldi, {"dither": 0.0}, 16000, files,
            graph_dir=Path(L.graph_dir("words")).resolve(),
        )  # fmt: skip
        tm = TransitionModel.from_file(kaldi / "am" / "final.mdl")
        tid2pdf = np.array([pdf for row in transition_ids(tm) for _t, _d, pdf in row])
        graph = kaldi / "graph"
        vosk0, vosk_s = cached_vosk(kaldi, wavs, f"{key}.vosk_dither0")
        regimes = {
            2: ("2. dither 0, vosk's i-vectors", None),
            3: ("3. dither 0, training-style i-vectors", stored),
            4: ("4. dither 0, per-utterance online i-vectors", 1),
            5: ("5. dither 0, pseudo-speakers as in training", args.utts_per_spk_max),
        }
        for part, (name, ivs) in regimes.items():
            if part not in parts:
                continue
            per = period
            if part == 2:
                ivs, per = (
                    {
                        u: vosk_online_ivectors(model, feats[u], len(audio[u]), mfcc, *system)
                        for u in feats
                    },
                    None,
                )
            elif part in (4, 5):
                ivs = online_ivectors(data.spk2utt, feats, system, ivs)
            ll = {u: paravg_loglikes(model, feats[u], ivs[u], per) for u in feats}
            hyp = reference_decode(ll, tid2pdf, graph / "HCLG.fst", graph / "words.txt")
            row(name + " vs vosk", hyp, vosk0, vosk_s)


if __name__ == "__main__":
    main()
