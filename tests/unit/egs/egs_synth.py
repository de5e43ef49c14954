"""Synthetic inputs for the egs tests: kaldiio feats / targets / i-vectors of a tiny data set.

Feature row t of utterance number k is [t, k, k*1000 + t, noise...], so any eg window can
be traced back to its utterance and frames (exact in float16 for t, k < 2048).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from paravg.egs import EgsArchive
from paravg.egs.archive import ArchiveMeta, EgsBatch, write_archive
from paravg.egs.plan import EgsOptions, plan_egs
from paravg.egs.shuffle import merge_archive
from paravg.egs.split import write_split_job
from paravg.egs.subsets import SUBSETS, write_subsets

FEAT_DIM = 5
IVECTOR_DIM = 3
PERIOD = 10
#: the loader tests' archive: frames per eg, left and right context, feature dim
F, LC, RC, D = 8, 4, 3, 3


@dataclass
class SynthData:
    dir: Path
    lengths: dict[str, int]
    feats_scp: Path
    utt2num_frames: Path
    targets_scp: Path
    utt2spk: Path
    ivector_scp: Path | None
    ivector_period: Path | None

    def feats(self, utt: str) -> np.ndarray:
        return kaldiio.load_scp(str(self.feats_scp))[utt]


def utt_feats(k: int, T: int, rng: np.random.Generator) -> np.ndarray:
    feats = rng.standard_normal((T, FEAT_DIM)).astype(np.float32)
    feats[:, 0] = np.arange(T)
    feats[:, 1] = k
    return feats


def utt_targets(k: int, T: int) -> np.ndarray:
    return ((np.arange(T) + k) % 7).astype(np.int32)


def make_data(
    root: Path,
    lengths: dict[str, int],
    ivectors: bool = False,
    target_delta: dict[str, int] | None = None,
    ivector_rows: dict[str, int] | None = None,
    utt2uniq: dict[str, str] | None = None,
    speakers: dict[str, str] | None = None,
) -> SynthData:
    """Write a tiny data set (utterance -> frames) in the paravg file contract."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    target_delta = target_delta or {}
    ivector_rows = ivector_rows or {}
    utts = sorted(lengths)
    with kaldiio.WriteHelper(f"ark,scp:{root}/feats.ark,{root}/feats.scp") as w:
        for k, u in enumerate(utts):
            w(u, utt_feats(k, lengths[u], rng))
    with kaldiio.WriteHelper(f"ark,scp:{root}/targets.ark,{root}/targets.scp") as w:
        for k, u in enumerate(utts):
            w(u, utt_targets(k, lengths[u] + target_delta.get(u, 0)))
    (root / "utt2num_frames").write_text("".join(f"{u} {lengths[u]}\n" for u in utts))
    speakers = speakers or {u: u.split("-")[0] for u in utts}
    (root / "utt2spk").write_text("".join(f"{u} {speakers[u]}\n" for u in utts))
    if utt2uniq:
        (root / "utt2uniq").write_text("".join(f"{u} {utt2uniq[u]}\n" for u in utts))
    ivector_scp = period_file = None
    if ivectors:
        ivector_scp, period_file = root / "ivector_online.scp", root / "ivector_period"
        with kaldiio.WriteHelper(f"ark,scp:{root}/ivector_online.ark,{ivector_scp}") as w:
            for k, u in enumerate(utts):
                rows = ivector_rows.get(u, math.ceil(lengths[u] / PERIOD))
                iv = np.zeros((rows, IVECTOR_DIM), np.float32)
                iv[:, 0] = np.arange(rows)  # row index, to check which row an eg got
                iv[:, 1] = k
                w(u, iv)
        period_file.write_text(f"{PERIOD}\n")
    return SynthData(
        root,
        dict(lengths),
        root / "feats.scp",
        root / "utt2num_frames",
        root / "targets.scp",
        root / "utt2spk",
        ivector_scp,
        period_file,
    )


def default_lengths(num_utts: int = 40, seed: int = 1) -> dict[str, int]:
    """Random lengths 8..150 frames, plus two utterances too short for an eg (5, 7)."""
    rng = np.random.default_rng(seed)
    lengths = {f"spk{i % 6}-utt{i:03d}": int(rng.integers(8, 150)) for i in range(num_utts)}
    lengths.update({"spk0-short1": 5, "spk1-short2": 7})
    return lengths


def synth_egs_options(**opts) -> EgsOptions:
    """Egs of 8 frames, context (3, 2), 50 samples per archive, 4 subset utterances, 2
    split jobs; ``opts`` replace any, or set the others."""
    base = {
        "frames_per_eg": 8,
        "left_context": 3,
        "right_context": 2,
        "samples_per_iter": 50,
        "num_utts_subset": 4,
        "nj": 2,
    }
    return EgsOptions(**{**base, **opts})


def plan_synth_egs(data: SynthData, out: Path, options: EgsOptions) -> dict:
    """The egs plan of ``data`` (``out``/info.json, ``out``/lists) as the egs rule makes it."""
    return plan_egs(
        data.feats_scp,
        data.utt2num_frames,
        data.targets_scp,
        data.utt2spk,
        out / "info.json",
        out / "lists",
        options,
        ivector_scp=data.ivector_scp,
        ivector_period_file=data.ivector_period,
        utt2uniq=data.dir / "utt2uniq",
    )


def build_egs(data: SynthData, out: Path, **opts) -> dict:
    """Run the whole egs stage like the rules do: plan, split jobs, archives, subsets."""
    small = {"num_frames_diagnostic": 80, "num_train_frames_combine": 160, "srand": 0}
    options = synth_egs_options(**{**small, **opts})
    info = plan_synth_egs(data, out, options)
    jobs = [out / "split" / f"job.{j}" for j in range(options.nj)]
    for j, prefix in enumerate(jobs):
        write_split_job(
            j,
            out / "lists" / f"job.{j}",
            out / "info.json",
            data.feats_scp,
            data.targets_scp,
            prefix,
            data.ivector_scp,
        )
    for a in range(info.num_archives):
        merge_archive(a, [str(p) for p in jobs], out / "info.json", out / f"egs.{a}")
    write_subsets(
        out / "lists" / "valid",
        out / "lists" / "train_subset",
        out / "info.json",
        data.feats_scp,
        data.targets_scp,
        {n: str(out / n) for n in SUBSETS},
        data.ivector_scp,
    )
    return {"info": info, "jobs": jobs}


def loader_archive(tmp_path: Path) -> EgsArchive:
    """The loader tests' archive of 37 egs of F frames: eg i, stored row r has feats
    [i, r - LC (time rel. to chunk start), i*0.5]."""
    n = 37
    meta = ArchiveMeta(n, F, LC, RC, D, 2, "float32")
    W = meta.window
    feats = np.zeros((n, W, D), np.float32)
    feats[:, :, 0] = np.arange(n)[:, None]
    feats[:, :, 1] = np.arange(W)[None, :] - LC
    feats[:, :, 2] = np.arange(n)[:, None] * 0.5
    labels = (np.arange(n)[:, None] * 100 + np.arange(F)[None, :]).astype(np.int32)
    weights = np.full((n, F), 0.25, np.float32) * (1 + np.arange(F))
    ivectors = np.stack([np.arange(n), -np.arange(n)], 1).astype(np.float32)
    write_archive(
        tmp_path / "egs.0",
        EgsBatch(feats, labels, weights, ivectors, [f"u-{i}" for i in range(n)]),
        meta,
    )
    return EgsArchive(tmp_path / "egs.0")
