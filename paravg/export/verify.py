"""Decode with Kaldi's own code (vosk) and with paravg's network, and compare.

* :func:`vosk_decode` runs ``vosk.KaldiRecognizer`` (Kaldi's online MFCC, online i-vectors,
  nnet3 computation and lattice decoder, as embedded in the vosk 0.3.45 wheel) on an
  exported directory, one fresh recogniser per utterance, in a child process (vosk aborts
  the whole process on a bad model; the child's exit is turned into a clear error);
* :func:`reference_decode` decodes the same graph with paravg's log-likelihoods
  ``acoustic_scale · (log p(pdf | x) − log prior)`` (features and i-vectors as paravg
  computed them; edge frames repeated as Kaldi's decodable does) and Kaldi's
  ``FasterDecoder`` (``kaldi-hmm-gmm``), graph costs scaled by vosk's 0.9;
* :func:`vosk_online_ivectors` gives, for every frame of the network's input window, the
  i-vector vosk's looped computation uses there (below), so that :func:`paravg_loglikes`
  with it computes what vosk computes;
* :func:`agreement` counts identical hypotheses and the error rate between them.

Everything here takes a model of either family (TDNN, TDNN-F): only its contexts, input
splice and forward are used (``tests/unit/export/test_nnet3_tdnnf.py`` checks vosk against
:func:`reference_decode` on an exported TDNN-F, with and without i-vectors).

How vosk 0.3.45 uses i-vectors (Kaldi's ``online2`` code it embeds, read in its source):

* a fresh recogniser per utterance starts a fresh ``OnlineIvectorFeature`` (no speaker
  adaptation carried over, unlike ``ivector-extract-online2`` on a speaker's utterances),
  with ``max_count = 100`` and ``use_most_recent_ivector``: one i-vector per chunk, that of
  the statistics of every frame the i-vector features have so far (the spliced frames
  ``0 .. M - r - 1`` of the ``M`` MFCC frames computed from the audio fed; all ``T`` after
  the end of input), by ``num_cg_iters`` CG steps warm-started from the previous one;
* ``DecodableNnetLoopedOnline`` computes chunk ``c`` (output frames ``cF .. cF + F - 1``,
  ``F = --frames-per-chunk``, 24) as soon as ``M ≥ (c + 1)F + R`` (``R``: the network's
  right context), otherwise at the end of input; the LDA-like layer at time ``τ`` reads
  i-vector index ``m = ⌊τ / F⌋`` (``ModifyNnetIvectorPeriod``: ``Round(ivector, F)``), and the
  looped computation keeps each index from the chunk that first needed it, the chunk that
  computes that layer at time ``mF``: ``c = max(0, ⌊(mF − R₁) / F⌋)`` (``R₁``: the right
  context above that layer). So most frames use the i-vector of one chunk earlier (seen
  in vosk's computation printout at verbose level 5: chunk 0 supplies indexes −F, 0, F,
  chunk c ≥ 1 index (c + 1)F for R₁ = 1);
* vosk's silence weighting weights every frame by 10⁻³ until the decoder has a traceback
  (the first chunk's i-vector is therefore close to the prior), and by 1 afterwards (its
  silence phones are never on a path of paravg's graphs; see ``NO_SILENCE_PHONES``).

``kaldi_hmm_gmm`` must be imported after ``kaldifst``: the other order hangs or cannot pass
FSTs between the packages.
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


def paravg_loglikes(model, feats: np.ndarray, ivectors: np.ndarray | None, period: int | None):
    """Pseudo-log-likelihoods log p(pdf | x_t) − log prior (a chain model's ``output``,
    no priors) for every output frame t
    (float64): t = 0, f, 2f, … for a model of frame-subsampling-factor f (every frame at
    f = 1), as Kaldi's decodables with ``--frame-subsampling-factor f``.

    Frame t sees frames t − left .. t + right (the first/last frame repeated beyond the
    utterance) and, at the LDA input, the i-vector row of its frame (⌊t / period⌋); with
    ``period=None`` ``ivectors`` has a row for every frame of the padded window
    (:func:`vosk_online_ivectors`)."""
    import torch

    from paravg.export.final_mdl import PRIOR_FLOOR

    x = torch.as_tensor(np.array(feats, dtype=np.float32))
    left, right = model.left_context, model.right_context
    xp = torch.cat([x[:1].expand(left, -1), x, x[-1:].expand(right, -1)])
    iv = None
    if model.ivector_dim:
        rows = np.asarray(ivectors, dtype=np.float32)
        # per-frame i-vectors for the whole padded window (AcousticModel.lda_rows, in both
        # families, keeps those of the frames it computes): window frame j is utterance
        # frame clip(j - left)
        if period is None:
            if rows.shape[0] != xp.shape[0]:
                raise ValueError(
                    f"{rows.shape[0]} i-vector rows for a window of {xp.shape[0]} frames"
                )
            full = rows
        else:
            t = np.clip(np.arange(xp.shape[0]) - left, 0, x.shape[0] - 1)
            full = rows[np.minimum(t // period, rows.shape[0] - 1)]
        iv = torch.from_numpy(full)[None]
    with torch.no_grad():
        logp = model(xp[None], iv, stride=model.frame_subsampling_factor)[0].double().numpy()
    if getattr(model, "objective", "xent") == "chain":  # no priors: its output as it is
        return logp
    log_priors = np.maximum(model.log_priors.double().numpy(), np.log(PRIOR_FLOOR))
    return logp - log_priors


# What vosk_run.py and vosk fix: 0.1-s pieces of audio, Kaldi's looped chunk size
# (NnetSimpleLoopedComputationOptions::frames_per_chunk), the silence weight before the
# first traceback (model.cc) and vosk's max_count (model.cc).
VOSK_PIECE_SECONDS = 0.1
VOSK_FRAMES_PER_CHUNK = 24
VOSK_WEIGHT_BEFORE_TRACEBACK = 1e-3
VOSK_MAX_COUNT = 100.0


def vosk_chunk_events(
    num_samples: int,
    mfcc,
    right_context: int,
    splice_right: int,
    frames_per_chunk: int = VOSK_FRAMES_PER_CHUNK,
    piece_seconds: float = VOSK_PIECE_SECONDS,
) -> list[tuple[int, int]]:
    """For each chunk ``c`` of the looped computation, ``(event, L)``: the decoding call
    that computes it (call ``k < K`` follows the ``k``-th of the ``K`` pieces of audio fed,
    call ``K`` the end of input) and the number ``L`` of i-vector frames ready then."""
    from paravg.features import num_frames

    if not mfcc.snip_edges:
        raise ValueError("vosk_chunk_events follows Kaldi's online MFCC with snip_edges only")
    total = num_frames(num_samples, mfcc)
    piece = round(piece_seconds * mfcc.sample_frequency)
    num_pieces = -(-num_samples // piece)
    num_chunks = -(-total // frames_per_chunk)
    events: list[tuple[int, int]] = []
    for k in range(num_pieces):
        ready = num_frames(min((k + 1) * piece, num_samples), mfcc)
        while len(events) < num_chunks and (
            ready >= (len(events) + 1) * frames_per_chunk + right_context
        ):
            events.append((k, max(0, ready - splice_right)))
    events += [(num_pieces, total)] * (num_chunks - len(events))
    return events


def vosk_online_ivectors(
    model,
    feats: np.ndarray,
    num_samples: int,
    mfcc,
    pipeline,
    ubm,
    extractor,
    opts,
    frames_per_chunk: int = VOSK_FRAMES_PER_CHUNK,
) -> np.ndarray:
    """The i-vector at every frame of the padded input window (``T + left + right`` rows,
    element 0 minus the prior offset, as the network sees it) that vosk's looped computation
    uses there, for an utterance of ``num_samples`` samples whose MFCCs are ``feats``.

    A model of frame-subsampling-factor f: the chunk is rounded up to a multiple of f
    (Kaldi's ``GetChunkSize``); the rest is as at f = 1: a chunk is computed once the same
    input frames are there (``DecodableNnetLoopedOnlineBase::NumFramesReady`` counts input
    frames), and the looped computation's requests (``CreateLoopedComputationRequestSimple``,
    ``nnet-compile-looped.cc``) take their input frames, and so their i-vector indexes,
    by input frame whatever f is; only the outputs are every f-th frame."""
    from paravg.ivector.online import OnlineIvectorStats, utterance_posteriors

    f = model.frame_subsampling_factor
    frames_per_chunk = -(-frames_per_chunk // f) * f

    feats = np.asarray(feats, dtype=np.float64)
    T = feats.shape[0]
    post = utterance_posteriors(ubm, pipeline.posterior_stream(feats, None), opts)
    dense = post.to_dense(extractor.num_gauss)
    X = np.einsum("tg,td->tgd", dense, pipeline.stats_stream(feats))
    I, D, S = extractor.M.shape
    lin = np.cumsum(X.reshape(T, I * D) @ extractor.Sigma_inv_M.reshape(I * D, S), axis=0)
    quad = np.cumsum((dense @ extractor.U.reshape(I, S * S)).reshape(T, S, S), axis=0)
    count = np.cumsum(dense.sum(axis=1))
    events = vosk_chunk_events(
        num_samples, mfcc, model.right_context, pipeline.context, frames_per_chunk
    )
    current = np.zeros(S)
    current[0] = extractor.prior_offset
    chunk_iv, last_event, first_event = [], None, events[0][0]
    for event, ready in events:
        if event != last_event and ready > 0:
            w = VOSK_WEIGHT_BEFORE_TRACEBACK if event == first_event else 1.0
            stats = OnlineIvectorStats(S, extractor.prior_offset, VOSK_MAX_COUNT)
            stats.add(w * lin[ready - 1], w * quad[ready - 1], w * float(count[ready - 1]))
            current = stats.get_ivector(opts.num_cg_iters, current)
        last_event = event
        iv = np.zeros(S, np.float32)
        if ready > 0:
            iv = current.astype(np.float32)
            iv[0] = np.float32(current[0] - extractor.prior_offset)
        chunk_iv.append(iv)
    # The LDA-like layer at time tau reads i-vector index F * floor(tau / F) (Kaldi's
    # ModifyNnetIvectorPeriod: Round(ivector, F)); the looped computation keeps each index
    # from the chunk that first needed it, the one computing that layer at time F * m:
    # chunk max(0, (F m - R1) // F).
    F = frames_per_chunk
    above_lda = model.right_context - max(model.input_splice)
    tau = np.arange(T + model.left_context + model.right_context) - model.left_context
    first_use = F * (tau // F)
    chunk = np.clip((first_use - above_lda) // F, 0, len(chunk_iv) - 1)
    return np.stack(chunk_iv)[chunk]


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

    from paravg.graph.hclg import read_fst

    fst = read_fst(hclg)
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
