"""``EgsInfo``: the geometry and bookkeeping of one egs directory (``{RESULTS}/egs/info.json``).

Mirrors the ``info/`` directory written by Kaldi's ``steps/nnet3/get_egs.sh``
(``num_archives``, ``frames_per_eg``, ``egs_per_archive``, ``num_frames``, ``feat_dim``,
``ivector_dim``, ``left_context``, ``right_context``) plus what this package needs
beyond Kaldi: the number of targets, seeds, the effective held-out subset size and the
utterance counts of the plan. It is written once by the egs plan (the Snakemake
checkpoint ``egs``) and read by every later stage.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from paravg.errors import DataError
from paravg.io import read_json, write_json_atomic

CHUNK_FIELDS = ("chunk_widths", "left_context_initial", "right_context_final")


@dataclass
class EgsInfo:
    """Everything later stages need to know about the egs (one JSON file).

    Archives are numbered 0 .. ``num_archives`` - 1 (``egs.<a>.*``; Kaldi's
    ``egs.<a+1>.ark``). ``egs_per_archive`` is Kaldi's nominal
    ``num_frames // (frames_per_eg * num_archives)``; the real count of an archive is in its
    ``egs.<a>.meta.json`` (egs are sent to archives at random, so counts differ slightly).
    """

    num_archives: int
    frames_per_eg: int
    egs_per_archive: int
    num_frames: int
    feat_dim: int
    ivector_dim: int  # 0 = no i-vectors
    ivector_period: int  # 0 when ivector_dim == 0
    left_context: int
    right_context: int
    num_targets: int
    srand: int = 0
    samples_per_iter: int = 400000
    compress: bool = True
    nj: int = 1
    targets_length_tolerance: int = 2
    num_utts: int = 0  # utterances usable for egs (targets present, >= frames_per_eg frames)
    num_utts_subset: int = 0  # effective size of the valid / train-subset draws
    num_utts_subset_requested: int = 0  # egs.num_utts_subset from the config
    num_valid_utts: int = 0  # after expansion over utt2uniq copies
    num_train_subset_utts: int = 0
    num_train_utts: int = 0  # utterances that go into the training archives
    num_train_egs: int = 0
    num_utts_too_short: int = 0  # fewer than frames_per_eg frames: no egs (Kaldi warns)
    num_utts_skipped: int = 0  # no targets (or no i-vectors): skipped like Kaldi
    num_egs_diagnostic: int = 0  # requested egs in valid_diag / train_diag
    num_egs_combine: int = 0  # requested egs in combine
    notes: list[str] = field(default_factory=list)
    # Chunk egs (egs.chunk_width; Kaldi's RNN egs): the widths (principal first; then
    # frames_per_eg is the principal, which sizes the archives as get_egs.sh does),
    # left_context / right_context the contexts of a chunk and these of an utterance's
    # first / last chunk (chunk contexts plus the model's: ChunkOptions.contexts). None
    # for frame egs, and then absent from info.json (whose bytes stay what they were).
    chunk_widths: list[int] | None = None
    left_context_initial: int | None = None
    right_context_final: int | None = None

    @property
    def chunked(self) -> bool:
        return self.chunk_widths is not None

    @property
    def window(self) -> int:
        """Input frames stored per eg: left_context + frames_per_eg + right_context
        (chunk egs: the widest of each, :mod:`paravg.egs.archive`)."""
        if self.chunked:
            return (
                max(self.left_context, self.left_context_initial)
                + max(self.chunk_widths)
                + max(self.right_context, self.right_context_final)
            )
        return self.left_context + self.frames_per_eg + self.right_context

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for key in CHUNK_FIELDS:
            if out[key] is None:
                del out[key]
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write as key-sorted JSON, atomically."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: dict, where: str = "egs info") -> EgsInfo:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise DataError(f"{where}: unknown keys {unknown}, expected an egs info.json")
        try:
            return cls(**data)
        except TypeError as exc:
            raise DataError(f"{where}: not an egs info.json ({exc})") from exc

    @classmethod
    def load(cls, path: str | os.PathLike) -> EgsInfo:
        """Read an ``info.json`` written by :meth:`save`."""
        return cls.from_dict(read_json(path), where=str(path))
