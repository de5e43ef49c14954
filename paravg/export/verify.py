"""Decode with Kaldi's own code (vosk) and with paravg's network, and compare.

* :func:`vosk_decode` runs ``vosk.KaldiRecognizer`` (Kaldi's online MFCC, online i-vectors,
  nnet3 computation and lattice decoder, as embedded in the vosk 0.3.45 wheel) on an
  exported directory, one fresh recogniser per utterance, in a child process (vosk aborts
  the whole process on a bad model; the child's exit is turned into a clear error);
* :func:`reference_decode` decodes the same graph with paravg's log-likelihoods
  ``acoustic_scale · (log p(pdf | x) − log prior)`` (features and i-vectors as paravg
  computed them; edge frames repeated as Kaldi's decodable does) and Kaldi's
  ``FasterDecoder`` (``kaldi-hmm-gmm``), graph costs scaled by vosk's 0.9;
* :func:`agreement` counts identical hypotheses and the error rate between them.

``kaldi_hmm_gmm`` must be imported after ``kaldifst`` (and ``kaldi_decoder`` never before
``kaldifst``): the other order hangs or cannot pass FSTs between the packages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from paravg.errors import ModelFileError

# vosk scales the graph part of its final lattice by 0.9 before taking the best path
# (recognizer.cc: ScaleLattice(GraphLatticeScale(0.9))).
VOSK_GRAPH_SCALE = 0.9


def vosk_decode(
    model_dir: str | Path, utt2wav: Mapping[str, str], sample_rate: int = 16000
) -> dict[str, str]:
    """Hypotheses (word strings) of vosk on each utterance's wav file."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = Path(tmp) / "jobs.json"
        out = Path(tmp) / "hyps.json"
        jobs.write_text(json.dumps({"model": str(model_dir), "rate": sample_rate,
                                    "wavs": dict(utt2wav)}))  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "paravg.export.vosk_run", str(jobs), str(out)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join(proc.stderr.splitlines()[-8:])
            raise ModelFileError(f"{model_dir}: vosk failed (exit {proc.returncode}):\n{tail}")
        return json.loads(out.read_text())


def paravg_loglikes(model, feats: np.ndarray, ivectors: np.ndarray | None, period: int):
    """Pseudo-log-likelihoods log p(pdf | x_t) − log prior for every frame t (float64).

    Frame t sees frames t − left .. t + right (the first/last frame repeated beyond the
    utterance) and, at the LDA input, the i-vector row of its frame (⌊t / period⌋)."""
    import torch

    from paravg.export.final_mdl import PRIOR_FLOOR

    x = torch.as_tensor(np.array(feats, dtype=np.float32))
    left, right = model.left_context, model.right_context
    xp = torch.cat([x[:1].expand(left, -1), x, x[-1:].expand(right, -1)])
    iv = None
    if model.ivector_dim:
        rows = np.asarray(ivectors, dtype=np.float32)
        # per-frame i-vectors for the whole padded window (TdnnModel.lda_input keeps those
        # of the spliced frames): window frame j is utterance frame clip(j - left)
        t = np.clip(np.arange(xp.shape[0]) - left, 0, x.shape[0] - 1)
        full = rows[np.minimum(t // period, rows.shape[0] - 1)]
        iv = torch.from_numpy(full)[None]
    with torch.no_grad():
        logp = model(xp[None], iv)[0].double().numpy()
    log_priors = np.maximum(model.log_priors.double().numpy(), np.log(PRIOR_FLOOR))
    return logp - log_priors


def reference_decode(
    loglikes: Mapping[str, np.ndarray],
    tid2pdf: np.ndarray,
    hclg: str | Path,
    words_txt: str | Path,
    acoustic_scale: float = 0.1,
    beam: float = 13.0,
    max_active: int = 7000,
    graph_scale: float = VOSK_GRAPH_SCALE,
) -> dict[str, str]:
    """Best paths of Kaldi's ``FasterDecoder`` on ``hclg`` (``tid2pdf[tid - 1]`` = pdf),
    cost = graph_scale · graph cost − acoustic_scale · log-likelihood (the best path is the
    one of acoustic scale ``acoustic_scale / graph_scale`` with graph scale 1)."""
    import kaldifst  # noqa: I001  (before kaldi_hmm_gmm)
    import kaldi_hmm_gmm as khg

    fst = kaldifst.StdVectorFst.read(str(hclg))
    words = {}
    for line in Path(words_txt).read_text().splitlines():
        w, i = line.split()
        words[int(i)] = w
    opts = khg.FasterDecoderOptions()
    opts.beam, opts.max_active = beam, max_active
    hyps = {}
    for utt, ll in loglikes.items():
        mat = (acoustic_scale / graph_scale * ll[:, tid2pdf]).astype(np.float32)
        dec = khg.FasterDecoder(fst, opts)
        dec.decode(khg.DecodableCtc(mat))
        _ok, best = dec.get_best_path()
        olabels = kaldifst.get_linear_symbol_sequence(best)[2]
        hyps[utt] = " ".join(words[o] for o in olabels if o)
    return hyps


def agreement(a: Mapping[str, str], b: Mapping[str, str]) -> dict:
    """Identical hypotheses and the edit distance of ``b`` against ``a`` as reference."""
    import kaldialign

    utts = sorted(set(a) & set(b))
    same = sum(a[u].split() == b[u].split() for u in utts)
    errs = words = 0
    for u in utts:
        ref, hyp = a[u].split(), b[u].split()
        words += len(ref)
        errs += kaldialign.edit_distance(ref, hyp)["total"]
    return {
        "utterances": len(utts),
        "identical": same,
        "identical_fraction": same / max(1, len(utts)),
        "error_rate_between": 100.0 * errs / max(1, words),
    }
