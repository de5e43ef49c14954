"""Training examples (egs): Kaldi's ``steps/nnet3/get_egs.sh`` and the readers of its archives.

Modules, in pipeline order:

* :mod:`~paravg.egs.info`: ``EgsInfo`` (``{RESULTS}/egs/info.json``);
* :mod:`~paravg.egs.inputs`: reading feats / targets / i-vectors with Kaldi's length checks;
* :mod:`~paravg.egs.plan`: held-out utterances, split jobs, number of archives;
* :mod:`~paravg.egs.chunking`: ``UtteranceSplitter`` (chunks, gaps, overlaps, weights);
* :mod:`~paravg.egs.make`: the egs of an utterance (padding, labels, i-vector rule);
* :mod:`~paravg.egs.archive`: the ``.npy``-per-field archive format and its writer;
* :mod:`~paravg.egs.split`: one split job (egs of its utterances + random archive per eg);
* :mod:`~paravg.egs.shuffle`: archive merge + full shuffle, buffer shuffle, reservoir;
* :mod:`~paravg.egs.subsets`: ``valid_diag``, ``train_diag``, ``combine``;
* :mod:`~paravg.egs.loader`: ``EgsArchive``, ``frame_minibatches``, ``all_frame_minibatches``,
  and for chunk egs ``chunk_minibatches``, ``all_chunk_minibatches``.
"""

from paravg.egs.info import EgsInfo

__all__ = [
    "EgsArchive",
    "EgsInfo",
    "Minibatch",
    "all_chunk_minibatches",
    "all_frame_minibatches",
    "all_minibatches",
    "chunk_minibatches",
    "frame_minibatches",
]

_LOADER_NAMES = {
    "EgsArchive",
    "Minibatch",
    "all_chunk_minibatches",
    "all_frame_minibatches",
    "all_minibatches",
    "chunk_minibatches",
    "frame_minibatches",
}


def __getattr__(name: str):
    # The loader needs torch (seconds to import); the Snakefile only needs EgsInfo, and
    # every SLURM job parses the Snakefile twice, so the loader is imported on first use.
    if name in _LOADER_NAMES:
        from paravg.egs import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'paravg.egs' has no attribute {name!r}")
