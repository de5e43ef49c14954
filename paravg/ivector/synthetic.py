"""Synthetic speaker data for the i-vector tests and benchmark (no audio needed).

Frames follow the i-vector model itself, so speaker information is known to be there:
a base GMM of ``num_components`` diagonal Gaussians in ``dim`` dimensions; speaker ``s``
shifts every component mean by ``V y_s`` (``y_s ~ N(0, I_rank)``, one shared low-rank
``V``) plus a channel offset ``b_s``; frames come from segments of one component (5 to 15
frames), smoothed in time like cepstra. :func:`write_corpus` writes Kaldi-style
``feats.scp`` (+ark), ``cmvn.scp`` (per speaker), ``spk2utt`` and ``utt2spk``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.ivector.cmvn import stats_of


@dataclass(frozen=True)
class SyntheticCorpus:
    feats_scp: Path
    cmvn_scp: Path
    spk2utt: Path
    utt2spk: Path
    num_frames: int


def speaker_utterances(
    rng: np.random.Generator,
    num_speakers: int,
    utts_per_speaker: int,
    frames: tuple[int, int] = (150, 400),
    dim: int = 40,
    num_components: int = 16,
    rank: int = 4,
    speaker_scale: float = 1.0,
) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Speaker -> [(utterance, T x dim float32 features)], ids sorted as Kaldi wants."""
    means = rng.normal(0.0, 3.0, (num_components, dim))
    stds = np.sqrt(rng.uniform(0.5, 1.5, (num_components, dim)))
    weights = rng.dirichlet(np.full(num_components, 5.0))
    V = rng.normal(0.0, speaker_scale, (num_components, dim, rank))
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    for s in range(num_speakers):
        spk = f"spk{s:03d}"
        shift = V @ rng.standard_normal(rank) + rng.normal(0.0, 0.5 * speaker_scale, dim)
        utts = []
        for u in range(utts_per_speaker):
            T = int(rng.integers(frames[0], frames[1] + 1))
            comps = []
            while len(comps) < T:
                comps += [int(rng.choice(num_components, p=weights))] * int(rng.integers(5, 16))
            c = np.array(comps[:T])
            x = means[c] + shift[c] + stds[c] * rng.standard_normal((T, dim))
            x[1:] = 0.7 * x[1:] + 0.3 * x[:-1]  # some temporal smoothing
            utts.append((f"{spk}-utt{u:03d}", x.astype(np.float32)))
        out[spk] = utts
    return out


def write_corpus(
    out_dir: str | os.PathLike, speakers: dict[str, list[tuple[str, np.ndarray]]]
) -> SyntheticCorpus:
    """Write the Kaldi files of ``speakers`` under ``out_dir``."""
    from paravg.kaldi_io import write_ark_scp

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    feats = [(utt, x) for utts in speakers.values() for utt, x in utts]
    num_frames = sum(x.shape[0] for _, x in feats)
    write_ark_scp(feats, d / "feats.ark", d / "feats.scp", absolute=False)
    cmvn = ((spk, sum(stats_of(x) for _, x in utts)) for spk, utts in speakers.items())
    write_ark_scp(cmvn, d / "cmvn.ark", d / "cmvn.scp", absolute=False)
    (d / "spk2utt").write_text(
        "".join(f"{spk} {' '.join(u for u, _ in utts)}\n" for spk, utts in speakers.items())
    )
    (d / "utt2spk").write_text(
        "".join(f"{u} {spk}\n" for spk, utts in speakers.items() for u, _ in utts)
    )
    return SyntheticCorpus(
        d / "feats.scp", d / "cmvn.scp", d / "spk2utt", d / "utt2spk", num_frames
    )
