"""Diagnostic and combination subsets (stage 3 of ``steps/nnet3/get_egs.sh``).

The held-out ``valid`` utterances and the ``train_subset`` utterances are cut into egs
exactly like training utterances (all F frames kept), then reservoir-sampled
(``nnet3-subset-egs``):

* ``valid_diag``: num_frames_diagnostic // F egs of valid (``valid_diagnostic.egs``);
* ``train_diag``: num_frames_diagnostic // F egs of train_subset (``train_diagnostic.egs``);
* ``combine``: num_train_frames_combine // F egs of train_subset (Kaldi's ``combine.egs``
  = valid_combine, 0 egs by default, + train_combine).

Each subset has its own generator, seeded from (srand, subset).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from paravg.egs.archive import EgsBatch, write_archive
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import EgsSources
from paravg.egs.make import chunk_utterances, iter_egs, meta_for
from paravg.egs.plan import read_uttlist
from paravg.egs.shuffle import reservoir_sample

log = logging.getLogger(__name__)

SUBSETS = ("valid_diag", "train_diag", "combine")
SUBSET_STREAMS = {"valid_diag": 401, "train_diag": 402, "combine": 403}


def utterance_list_egs(utts: list[tuple[str, int]], sources: EgsSources, info: EgsInfo) -> EgsBatch:
    """All egs of a (small) utterance list, in memory."""
    chunks = chunk_utterances(utts, info)
    return EgsBatch.concatenate(list(iter_egs(utts, chunks, sources, info)), meta_for(info, 0))


def write_subsets(
    valid_list: str | os.PathLike,
    train_subset_list: str | os.PathLike,
    info_path: str | os.PathLike,
    feats_scp: str | os.PathLike,
    targets_scp: str | os.PathLike,
    out_prefixes: dict[str, str],
    ivector_scp: str | os.PathLike | None = None,
) -> dict[str, int]:
    """Write the ``valid_diag``, ``train_diag`` and ``combine`` archives; return their sizes."""
    if set(out_prefixes) != set(SUBSETS):
        raise ValueError(f"out_prefixes must name {SUBSETS}, got {sorted(out_prefixes)}")
    info = EgsInfo.load(info_path)
    valid_utts, train_utts = read_uttlist(valid_list), read_uttlist(train_subset_list)
    sources = EgsSources(
        feats_scp,
        targets_scp,
        ivector_scp,
        info.ivector_period,
        info.targets_length_tolerance,
        utts={utt for utt, _ in valid_utts + train_utts},
    )
    valid = utterance_list_egs(valid_utts, sources, info)
    train = utterance_list_egs(train_utts, sources, info)
    plan = {
        "valid_diag": (valid, info.num_egs_diagnostic),
        "train_diag": (train, info.num_egs_diagnostic),
        "combine": (train, info.num_egs_combine),
    }
    sizes = {}
    for name in SUBSETS:
        pool, n = plan[name]
        rng = np.random.default_rng([info.srand, SUBSET_STREAMS[name]])
        chosen = pool.take(reservoir_sample(len(pool), n, rng))
        write_archive(out_prefixes[name], chosen, meta_for(info, len(chosen)))
        sizes[name] = len(chosen)
        log.info("%s: %d egs (of %d, wanted %d)", name, len(chosen), len(pool), n)
    return sizes
