"""Kaldi's ``TransitionModel``: read from a ``final.mdl``, taken from ``kaldi-hmm-gmm``,
written in text or binary form.

Mirrors ``TransitionModel::Write/Read`` (``src/hmm/transition-model.cc``) and
``HmmTopology::Write/Read`` (``src/hmm/hmm-topology.cc``)::

    <TransitionModel> <Topology> ... </Topology>
    <Triples> N  (phone hmm-state pdf)*N </Triples>          (every state: forward = self-loop pdf)
    | <Tuples> N (phone hmm-state forward-pdf self-loop-pdf)*N </Tuples>
    <LogProbs> Vector </LogProbs> </TransitionModel>

The topology in text form lists ``<TopologyEntry> <ForPhones> phones </ForPhones>
<State> j [<PdfClass> c | <ForwardPdfClass> f <SelfLoopPdfClass> s] (<Transition> dst p)*
</State>* </TopologyEntry>``; in binary form ``phones``, ``phone2idx`` (int vectors), ``-1``
if not an HMM, the number of entries and per state the pdf classes and transitions.
A GMM ``final.mdl`` holds the TransitionModel first, so reading stops after it.
Number of pdfs = 1 + the largest pdf in the tuples (``TransitionModel::ComputeDerived``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter

NO_PDF = -1


@dataclass
class HmmState:
    forward_pdf_class: int
    self_loop_pdf_class: int
    transitions: list[tuple[int, float]]


@dataclass
class TransitionModel:
    phones: list[int]
    phone2idx: list[int]  # indexed by phone; -1 = no entry
    entries: list[list[HmmState]]
    tuples: np.ndarray  # (N, 4): phone, hmm_state, forward_pdf, self_loop_pdf
    log_probs: np.ndarray  # (num_transition_ids + 1,), index 0 unused

    @property
    def num_pdfs(self) -> int:
        return int(self.tuples[:, 2:].max()) + 1 if len(self.tuples) else 0

    @property
    def is_hmm(self) -> bool:
        return all(s.forward_pdf_class == s.self_loop_pdf_class for e in self.entries for s in e)

    # ------------------------------------------------------------------ kaldi-hmm-gmm
    @classmethod
    def from_kaldi_hmm_gmm(cls, tm) -> TransitionModel:
        """From a ``kaldi_hmm_gmm.TransitionModel`` (its pickled state: tuples, topology,
        state2id, id2state, id2pdf, num_pdfs, log_probs, non-self-loop log-probs)."""
        tuples, topo, *_rest = tm.__getstate__()
        log_probs = _rest[-2]
        phones, phone2idx, entries = topo.__getstate__()
        return cls(
            list(phones),
            list(phone2idx),
            [
                [
                    HmmState(s.forward_pdf_class, s.self_loop_pdf_class, list(s.transitions))
                    for s in entry
                ]
                for entry in entries
            ],
            np.array([t.__getstate__() for t in tuples], dtype=np.int64).reshape(-1, 4),
            np.asarray(log_probs, dtype=np.float64),
        )

    # ------------------------------------------------------------------ writing
    def write(self, w: KaldiWriter) -> None:
        is_hmm = self.is_hmm
        w.token("<TransitionModel>")
        w.newline()
        self._write_topology(w, is_hmm)
        w.token("<Triples>" if is_hmm else "<Tuples>")
        w.int32(len(self.tuples))
        w.newline()
        for phone, state, fwd, loop in self.tuples:
            w.int32(phone)
            w.int32(state)
            w.int32(fwd)
            if not is_hmm:
                w.int32(loop)
            w.newline()
        w.token("</Triples>" if is_hmm else "</Tuples>")
        w.newline()
        w.token("<LogProbs>")
        w.newline()
        w.vector(self.log_probs)
        w.token("</LogProbs>")
        w.newline()
        w.token("</TransitionModel>")
        w.newline()

    def _write_topology(self, w: KaldiWriter, is_hmm: bool) -> None:
        w.token("<Topology>")
        if not w.binary:
            w.raw("\n")
            for i, entry in enumerate(self.entries):
                w.raw("<TopologyEntry> \n<ForPhones> \n")
                w.raw("".join(f"{p} " for p, idx in enumerate(self.phone2idx) if idx == i))
                w.raw("\n</ForPhones> \n")
                for j, s in enumerate(entry):
                    w.token("<State>")
                    w.int32(j)
                    if s.forward_pdf_class != NO_PDF:
                        if is_hmm:
                            w.token("<PdfClass>")
                            w.int32(s.forward_pdf_class)
                        else:
                            w.token("<ForwardPdfClass>")
                            w.int32(s.forward_pdf_class)
                            w.token("<SelfLoopPdfClass>")
                            w.int32(s.self_loop_pdf_class)
                    for dst, prob in s.transitions:
                        w.token("<Transition>")
                        w.int32(dst)
                        w.float32(prob)
                    w.token("</State>")
                    w.raw("\n")
                w.raw("</TopologyEntry> \n")
        else:
            w.int_vector(self.phones)
            w.int_vector(self.phone2idx)
            if not is_hmm:
                w.int32(-1)
            w.int32(len(self.entries))
            for entry in self.entries:
                w.int32(len(entry))
                for s in entry:
                    w.int32(s.forward_pdf_class)
                    if not is_hmm:
                        w.int32(s.self_loop_pdf_class)
                    w.int32(len(s.transitions))
                    for dst, prob in s.transitions:
                        w.int32(dst)
                        w.float32(prob)
        w.token("</Topology>")
        w.newline()

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, r: KaldiReader) -> TransitionModel:
        r.expect("<TransitionModel>")
        phones, phone2idx, entries = _read_topology(r)
        tag = r.token()
        if tag not in ("<Triples>", "<Tuples>"):
            raise r.error(f"expected <Triples> or <Tuples>, got {tag!r}")
        n = r.int32()
        width = 3 if tag == "<Triples>" else 4
        rows = [[r.int32() for _ in range(width)] for _ in range(n)]
        tuples = np.array(rows, dtype=np.int64).reshape(n, width)
        if width == 3:
            tuples = np.concatenate([tuples, tuples[:, 2:3]], axis=1)
        r.expect(tag.replace("<", "</"))
        r.expect("<LogProbs>")
        log_probs = r.vector()
        r.expect("</LogProbs>")
        r.expect("</TransitionModel>")
        return cls(phones, phone2idx, entries, tuples, np.asarray(log_probs, np.float64))

    @classmethod
    def from_file(cls, path: str | Path) -> TransitionModel:
        """The TransitionModel at the start of a Kaldi ``final.mdl`` (GMM or nnet3)."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ModelFileError(f"{path}: cannot read the transition model ({exc})") from exc
        r = KaldiReader(data, f"{path}")
        try:
            return cls.read(r)
        except (ModelFileError, ValueError, IndexError) as exc:
            raise ModelFileError(
                f"{path}: not a Kaldi model with a TransitionModel: {exc}"
            ) from exc


def _read_topology(r: KaldiReader) -> tuple[list[int], list[int], list[list[HmmState]]]:
    r.expect("<Topology>")
    if r.binary:
        phones = [int(p) for p in r.int_vector()]
        phone2idx = [int(p) for p in r.int_vector()]
        n = r.int32()
        is_hmm = n != -1
        if not is_hmm:
            n = r.int32()
        entries = []
        for _ in range(n):
            states = []
            for _ in range(r.int32()):
                fwd = r.int32()
                loop = fwd if is_hmm else r.int32()
                trans = [(r.int32(), r.float()) for _ in range(r.int32())]
                states.append(HmmState(fwd, loop, trans))
            entries.append(states)
        r.expect("</Topology>")
        return phones, phone2idx, entries
    entries, phone_sets = [], []
    tok = r.token()
    while tok == "<TopologyEntry>":
        r.expect("<ForPhones>")
        phones_here = []
        tok = r.token()
        while tok != "</ForPhones>":
            phones_here.append(int(tok))
            tok = r.token()
        states = []
        tok = r.token()
        while tok == "<State>":
            r.int32()
            fwd = loop = NO_PDF
            trans = []
            tok = r.token()
            if tok == "<PdfClass>":
                fwd = loop = r.int32()
                tok = r.token()
            elif tok == "<ForwardPdfClass>":
                fwd = r.int32()
                r.expect("<SelfLoopPdfClass>")
                loop = r.int32()
                tok = r.token()
            while tok == "<Transition>":
                trans.append((r.int32(), r.float()))
                tok = r.token()
            if tok != "</State>":
                raise r.error(f"expected </State>, got {tok!r}")
            states.append(HmmState(fwd, loop, trans))
            tok = r.token()
        if tok != "</TopologyEntry>":
            raise r.error(f"expected </TopologyEntry>, got {tok!r}")
        entries.append(states)
        phone_sets.append(phones_here)
        tok = r.token()
    if tok != "</Topology>":
        raise r.error(f"expected </Topology>, got {tok!r}")
    phones = sorted(p for s in phone_sets for p in s)
    phone2idx = [-1] * (max(phones) + 1 if phones else 0)
    for i, s in enumerate(phone_sets):
        for p in s:
            phone2idx[p] = i
    return phones, phone2idx, entries
