"""Benchmark of the i-vector stage: training time, extraction speed, speaker discrimination.

Trains PCA, UBM and extractor in-process with the ``ivector`` values of
``config/config.yaml`` (one BLAS thread: numbers are per core), then extracts online
i-vectors. Data: a pipeline results directory with ``feats/<set>/`` and ``data/<set>/``
(e.g. after ``snakemake --cores 2 results/feats/test/cmvn.scp results/feats/train/cmvn.scp``
on the demo corpus), or a synthetic corpus drawn from the i-vector model (``--synthetic``).

Reported, side by side with a baseline measured in the same run:

* extraction speed in x real time per core (100 frames = 1 s), CG (Kaldi) vs exact solve;
* training time of the UBM and the extractor, and time relative to the audio duration;
* speaker identification on the held-out set: every utterance gets its own i-vector
  (fresh adaptation state, last online row), centred on the training i-vectors' mean and
  length-normalised; each utterance is scored by cosine against every speaker's mean of
  the *other* utterances (leave one out). Baselines: chance, and the same scoring of the
  utterance mean of the PCA features (a no-UBM "mean supervector"). Also the equal error
  rate over all same/different-speaker pairs.

    python benchmarks/bench_ivector.py --results results            # demo pipeline output
    python benchmarks/bench_ivector.py --synthetic                  # no data needed
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from _harness import REPO, Timer, synthetic_ivector_sets, train_ivector_models  # noqa: E402

from paravg.config import validate_config  # noqa: E402
from paravg.ivector import data  # noqa: E402
from paravg.ivector.extractor import IvectorExtractor  # noqa: E402
from paravg.ivector.features import IvectorFeaturePipeline  # noqa: E402
from paravg.ivector.online import OnlineIvectorOptions, extract_speaker  # noqa: E402
from paravg.ivector.ubm import DiagGmm  # noqa: E402


def set_paths(results: Path, name: str) -> dict[str, Path]:
    """The features, CMVN and speakers of set ``name`` of a run's results (its layout)."""
    from paravg.layout import Layout

    L = Layout(str(results))
    return {
        "feats": Path(L.feats_scp(name)),
        "cmvn": Path(L.feats_file(name, "cmvn.scp")),
        "spk2utt": Path(L.data_file(name, "spk2utt")),
    }


def utterance_ivectors(iv, d, feats_scp, spk2utt, num_cg_iters, timer, name):
    """Last online row of every utterance, each with a fresh state; and its frame count."""
    ex = IvectorExtractor.load(d / "extractor.npz")
    ubm = DiagGmm.load(d / "ubm.npz")
    pipeline = IvectorFeaturePipeline.load(d / "pca.npz")
    opts = OnlineIvectorOptions(
        period=iv["period"],
        num_cg_iters=num_cg_iters,
        num_gselect=iv["num_gselect_post"],
        min_post=iv["min_post"],
        posterior_scale=iv["posterior_scale"],
        max_remembered_frames=iv["max_remembered_frames"],
    )
    source = data.FeatureSource(feats_scp)
    out, means, frames = {}, {}, 0
    for spk, utts in data.read_spk2utt(spk2utt).items():
        for utt in utts:
            x = source[utt]
            frames += x.shape[0]
            res = timer(
                name,
                lambda x=x, utt=utt: list(extract_speaker(ex, ubm, pipeline, [(utt, x)], opts)),
            )
            out[utt] = (spk, res[0][1].ivectors[-1].astype(np.float64))
            means[utt] = (spk, pipeline.stats_stream(x).mean(axis=0))
    return out, means, frames


def speaker_id(vectors: dict, centre: np.ndarray) -> tuple[float, float, int, int]:
    """Leave-one-out cosine speaker identification accuracy and pairwise EER."""
    utts = list(vectors)
    spk = np.array([vectors[u][0] for u in utts])
    X = np.stack([vectors[u][1] for u in utts]) - centre
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    speakers = sorted(set(spk))
    correct = trials = 0
    for i in range(len(utts)):
        others = np.arange(len(utts)) != i
        if (spk[others] == spk[i]).sum() == 0:
            continue
        models = []
        for s in speakers:
            m = X[others & (spk == s)]
            models.append(m.mean(axis=0) if len(m) else np.full(X.shape[1], np.nan))
        scores = np.nan_to_num(np.stack(models) @ X[i], nan=-np.inf)
        correct += speakers[int(np.argmax(scores))] == spk[i]
        trials += 1
    sims = X @ X.T
    iu = np.triu_indices(len(utts), 1)
    same = (spk[:, None] == spk[None, :])[iu]
    s = sims[iu]
    thresholds = np.sort(s)
    far = np.array([(s[~same] >= t).mean() for t in thresholds])
    frr = np.array([(s[same] < t).mean() for t in thresholds])
    k = int(np.argmin(np.abs(far - frr)))
    return correct / max(trials, 1), (far[k] + frr[k]) / 2, trials, len(speakers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, help="pipeline results dir with feats/ and data/")
    ap.add_argument("--train", default="train")
    ap.add_argument("--test", default="test")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    args = ap.parse_args()
    config = validate_config(yaml.safe_load(args.config.read_text()))
    iv = config["ivector"]
    timer = Timer()
    with tempfile.TemporaryDirectory(prefix="bench_ivector.") as tmp:
        d = Path(tmp)
        if args.synthetic or not args.results:
            tr, te = synthetic_ivector_sets(d / "corpus")
            source = "synthetic (i-vector model, 40 train / 15 test speakers)"
        else:
            tr, te = set_paths(args.results, args.train), set_paths(args.results, args.test)
            source = str(args.results)
        train_ivector_models(iv, tr, d, timer)
        train_iv, _, train_frames = utterance_ivectors(
            iv, d, tr["feats"], tr["spk2utt"], iv["num_cg_iters"], timer, "train-extract"
        )
        test_iv, test_means, test_frames = utterance_ivectors(
            iv, d, te["feats"], te["spk2utt"], iv["num_cg_iters"], timer, "extract-cg"
        )
        test_exact, _, _ = utterance_ivectors(
            iv, d, te["feats"], te["spk2utt"], 0, timer, "extract-exact"
        )
    train_sec, test_sec = train_frames / 100.0, test_frames / 100.0
    centre = np.mean([v for _, v in train_iv.values()], axis=0)
    acc, eer, trials, nspk = speaker_id(test_iv, centre)
    acc_x, eer_x, _, _ = speaker_id(test_exact, centre)
    acc_m, eer_m, _, _ = speaker_id(test_means, np.mean([v for _, v in test_means.values()], 0))
    t = timer.times
    print(f"# i-vector benchmark: {source}")
    print(
        f"# config: {iv['num_gauss']} Gaussians, dim {iv['dim']}, {iv['ubm_num_iters']} UBM / "
        f"{iv['extractor_num_iters']} extractor iterations; train {train_sec / 60:.1f} min, "
        f"test {test_sec / 60:.1f} min, {nspk} test speakers, {trials} trials; 1 thread"
    )
    print()
    print("| quantity | measured | baseline | ratio |")
    print("|---|---|---|---|")
    x_cg, x_exact = test_sec / t["extract-cg"], test_sec / t["extract-exact"]
    print(
        f"| extraction speed (x real time per core), CG 15 | {x_cg:.0f} | exact solve "
        f"{x_exact:.0f} | {x_cg / x_exact:.2f} |"
    )
    print(
        f"| PCA training CPU time (s) | {t['pca']:.1f} | train audio {train_sec:.0f} s | "
        f"{t['pca'] / train_sec:.4f} |"
    )
    print(
        f"| UBM training CPU time (s) | {t['ubm']:.1f} | train audio {train_sec:.0f} s | "
        f"{t['ubm'] / train_sec:.4f} |"
    )
    print(
        f"| extractor training CPU time (s) | {t['extractor']:.1f} | train audio "
        f"{train_sec:.0f} s | {t['extractor'] / train_sec:.4f} |"
    )
    print(
        f"| speaker ID accuracy, i-vector (CG) | {acc:.3f} | chance {1 / nspk:.3f} | "
        f"{acc * nspk:.1f} |"
    )
    print(
        f"| speaker ID accuracy, i-vector (exact) | {acc_x:.3f} | i-vector (CG) {acc:.3f} | "
        f"{acc_x / max(acc, 1e-9):.2f} |"
    )
    print(
        f"| speaker ID accuracy, i-vector | {acc:.3f} | mean PCA feature {acc_m:.3f} | "
        f"{acc / max(acc_m, 1e-9):.2f} |"
    )
    print(
        f"| pairwise EER, i-vector | {eer:.3f} | mean PCA feature {eer_m:.3f} | "
        f"{eer / max(eer_m, 1e-9):.2f} |"
    )
    print(f"| pairwise EER, i-vector (exact) | {eer_x:.3f} | chance 0.500 | {eer_x / 0.5:.2f} |")


if __name__ == "__main__":
    main()
