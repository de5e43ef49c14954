"""The synthetic demo corpus: a labelled multi-speaker speech corpus made on the machine.

No labelled speech corpus can be downloaded here, so one is synthesized with the TTS
engines of Debian main (flite, festival, optionally espeak-ng) and labelled per frame with
the engines' own phone timing. Modules: :mod:`~paravg.corpus.text` (sentence grammar),
:mod:`~paravg.corpus.phones` (40-label set and engine phone maps),
:mod:`~paravg.corpus.engines` (+ :mod:`~paravg.corpus.espeak`), :mod:`~paravg.corpus.resample`,
:mod:`~paravg.corpus.perturb`, :mod:`~paravg.corpus.labels` (Kaldi framing),
:mod:`~paravg.corpus.plan` (speakers, split, budgets), :mod:`~paravg.corpus.kaldi_dir`
and :mod:`~paravg.corpus.build` (:func:`build_demo_corpus`).
"""

__all__ = ["build_demo_corpus"]


def __getattr__(name: str):
    # Lazy, so that ``python -m paravg.corpus.espeak`` (one process per espeak batch)
    # does not import the whole builder.
    if name == "build_demo_corpus":
        from paravg.corpus.build import build_demo_corpus

        return build_demo_corpus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
