"""Training graphs and alignment: ``compile-train-graphs``, ``align-equal-compiled``,
``gmm-align-compiled``.

* ``compile-train-graphs`` (``src/bin/compile-train-graphs.cc``,
  ``decoder/training-graph-compiler.cc``): per utterance, the linear word acceptor of its
  transcript composed with the lexicon ``L.fst`` (disambiguation symbols removed), the
  context transducer of the tree and the HMMs ``H`` of the transition model, self-loops
  added. As compile-train-graphs does, the transition and self-loop scales are 0 here:
  the probabilities are added at alignment time, since they change every iteration.
* ``align-equal-compiled``: a random path through the graph with exactly ``T`` emitting
  arcs (kaldifst ``EqualAlign``, seeded per utterance: crc32 of its id, where Kaldi
  hashes the id), its input labels the alignment: the phones' frames are equal shares.
* ``gmm-align-compiled`` (``decoder/decoder-wrappers.cc: AlignUtteranceWrapper``): the
  graph with transition probabilities added (``AddTransitionProbs``, train_mono.sh's
  ``--transition-scale=1.0 --self-loop-scale=0.1``), Viterbi-decoded against
  ``acoustic_scale · log p(x_t | pdf)`` (``--acoustic-scale=0.1``) with ``--beam``; an
  utterance that reaches no final state is retried with ``--retry-beam``, then fails
  (left out of the alignment, as Kaldi does). The model may be the ``gmm-boost-silence``
  copy (:func:`paravg.gmm.model.boost_silence`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.gmm.model import GmmModel
from paravg.graph.dict_dir import map_text
from paravg.graph.lang import read_symbol_table


@dataclass
class AlignOptions:
    """gmm-align-compiled's options (align_si.sh's and train_mono.sh's values)."""

    beam: float = 10.0
    retry_beam: float = 40.0
    careful: bool = False
    acoustic_scale: float = 0.1
    transition_scale: float = 1.0
    self_loop_scale: float = 0.1


@dataclass
class AlignResult:
    """The alignments of a job, and gmm-align-compiled's log."""

    alignments: dict[str, np.ndarray] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    retried: int = 0
    tot_like: float = 0.0
    frames: int = 0


def read_transcripts(lang_dir: str | Path, text: str | Path) -> dict[str, list[int]]:
    """A data dir's ``text`` as word ids of the lang dir (``sym2int.pl --map-oov``
    with the lang's ``oov.txt``)."""
    lang = Path(lang_dir)
    words = read_symbol_table(lang / "words.txt")
    oov_file = lang / "oov.txt"
    oov = oov_file.read_text().split()[0] if oov_file.is_file() else None
    return {utt: [words[w] for w in ws] for utt, ws in map_text(text, words, oov).items()}


def graph_compiler(model: GmmModel, lang_dir: str | Path):
    """A ``TrainingGraphCompiler`` on ``lang/L.fst`` and ``phones/disambig.int``."""
    import kaldi_hmm_gmm
    import kaldifst

    lang = Path(lang_dir)
    for name in ("L.fst", "phones/disambig.int", "words.txt"):
        if not (lang / name).is_file():
            raise DataError(f"{lang}: not a lang dir, missing {name}")
    lex = kaldifst.StdVectorFst.read(str(lang / "L.fst"))
    disambig = [int(x) for x in (lang / "phones/disambig.int").read_text().split()]
    opts = kaldi_hmm_gmm.TrainingGraphCompilerOptions()
    opts.transition_scale = 0.0
    opts.self_loop_scale = 0.0
    return kaldi_hmm_gmm.TrainingGraphCompiler(
        trans_model=model.trans, ctx_dep=model.ctx, lex_fst=lex, disambig_syms=disambig, opts=opts
    )


def compile_graphs(compiler, transcripts: Mapping[str, list[int]]) -> dict:
    """``compile-train-graphs``: utt -> training graph (a kaldifst ``StdVectorFst``)."""
    return {utt: compiler.compile_graph_from_text(words) for utt, words in transcripts.items()}


def equal_alignment(graph, num_frames: int, utt: str) -> np.ndarray | None:
    """``align-equal-compiled`` of one utterance: a random path through ``graph`` with
    exactly ``num_frames`` emitting arcs (seeded by crc32 of ``utt``), its input labels;
    None when the graph has no such path (too few frames)."""
    import kaldifst

    ok, path = kaldifst.equal_align(graph, int(num_frames), zlib.crc32(utt.encode()) & 0x7FFFFFFF)
    if not ok:
        return None
    _ok, ilabels, _words, _weight = kaldifst.get_linear_symbol_sequence(path)
    return np.asarray(ilabels, np.int32)


def align_equal(graphs: Mapping, num_frames: Mapping[str, int]) -> AlignResult:
    """``align-equal-compiled``: an equal alignment of every utterance with a graph and
    ``num_frames``; an utterance with too few frames for its graph fails."""
    result = AlignResult()
    for utt, graph in graphs.items():
        if utt not in num_frames:
            continue
        ali = equal_alignment(graph, num_frames[utt], utt)
        if ali is None:
            result.failed.append(utt)
            continue
        result.alignments[utt] = ali
        result.frames += len(ali)
    return result


class ViterbiAligner:
    """``gmm-align-compiled`` one utterance at a time (``AlignUtteranceWrapper``), its
    log's totals kept across calls: utterances done, failed, retried with
    ``--retry-beam``, the total log-likelihood and frames of those aligned."""

    def __init__(self, model: GmmModel, opts: AlignOptions | None = None):
        import kaldi_hmm_gmm

        self.model, self.opts = model, opts or AlignOptions()
        self.config = kaldi_hmm_gmm.AlignConfig()
        self.config.beam, self.config.retry_beam = self.opts.beam, self.opts.retry_beam
        self.config.careful = self.opts.careful
        self.done = self.errors = self.retried = 0
        self.tot_like, self.frames = 0.0, 0

    def __call__(self, utt: str, graph, feats: np.ndarray) -> np.ndarray | None:
        """The alignment of ``utt`` (its training ``graph``, its ``feats [T, D]``), or
        None when no path reaches a final state within the retry beam."""
        import kaldi_hmm_gmm
        import kaldifst

        opts = self.opts
        fst = kaldifst.StdVectorFst(graph)
        kaldi_hmm_gmm.add_transition_probs(
            trans_model=self.model.trans, transition_scale=opts.transition_scale,
            self_loop_scale=opts.self_loop_scale, fst=fst,
        )  # fmt: skip
        decodable = kaldi_hmm_gmm.DecodableAmDiagGmmScaled(
            am=self.model.am, tm=self.model.trans, feats=np.asarray(feats, np.float32),
            scale=opts.acoustic_scale,
        )  # fmt: skip
        before = self.done
        self.done, self.errors, self.retried, self.tot_like, self.frames, alignment, _words = (
            kaldi_hmm_gmm.align_utterance_wrapper(
                config=self.config, utt=utt, acoustic_scale=opts.acoustic_scale, fst=fst,
                decodable=decodable, num_done=self.done, num_error=self.errors,
                num_retried=self.retried, tot_like=self.tot_like, frame_count=self.frames,
            )
        )  # fmt: skip
        if self.done > before and len(alignment) == len(feats):
            return np.asarray(alignment, np.int32)
        return None


def align(
    model: GmmModel,
    graphs: Mapping,
    feats: Mapping[str, np.ndarray],
    opts: AlignOptions | None = None,
) -> AlignResult:
    """``gmm-align-compiled``: Viterbi alignments of the utterances in both tables."""
    aligner = ViterbiAligner(model, opts)
    result = AlignResult()
    for utt, graph in graphs.items():
        if utt not in feats:
            continue
        ali = aligner(utt, graph, feats[utt])
        if ali is None:
            result.failed.append(utt)
        else:
            result.alignments[utt] = ali
    result.retried, result.tot_like, result.frames = (
        aligner.retried, aligner.tot_like, aligner.frames,
    )  # fmt: skip
    return result
