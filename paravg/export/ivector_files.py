"""paravg's online i-vector system as Kaldi's extractor directory.

What ``steps/online/nnet2/train_ivector_extractor.sh`` leaves in ``exp/nnet3/extractor``
and ``OnlineIvectorExtractionInfo`` (``src/online2/online-ivector-feature.cc``) reads:

* ``final.mat``: the PCA transform, ``Matrix<float>`` ``dim x (D (2c+1) + 1)`` (last
  column: offset); from ``pca.npz``;
* ``global_cmvn.stats``: ``Matrix<double>`` ``2 x (D + 1)`` (row 0: sums and count, row 1:
  sums of squares), the global stats of the online CMN of the posterior stream;
* ``online_cmvn.conf``: ``OnlineCmvnOptions`` (``--cmn-window`` ...);
* ``splice_opts`` (Kaldi's name) and ``splice.conf`` (what vosk reads):
  ``--left-context=c --right-context=c``;
* ``final.dubm``: ``DiagGmm::Write``: ``<DiagGMM> <GCONSTS> v <WEIGHTS> v
  <MEANS_INVVARS> M <INV_VARS> M </DiagGMM>`` (floats; Kaldi recomputes the gconsts);
* ``final.ie``: ``IvectorExtractor::Write``: ``<IvectorExtractor> <w> (empty: no
  i-vector-dependent weights) <w_vec> v <M> I  M_i (D x S, double)*I <SigmaInv>
  (SpMatrix<double>)*I <IvectorOffset> p </IvectorExtractor>``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paravg.export.kaldi_stream import KaldiWriter
from paravg.io import atomic_path, write_text_atomic
from paravg.ivector.extractor import IvectorExtractor
from paravg.ivector.features import IvectorFeaturePipeline
from paravg.ivector.ubm import DiagGmm


def _write(path: Path, w: KaldiWriter) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(w.getvalue())


def dubm_bytes(gmm: DiagGmm, binary: bool = True) -> bytes:
    w = KaldiWriter(binary)
    w.token("<DiagGMM>")
    w.newline()
    w.token("<GCONSTS>")
    w.vector(gmm.gconsts)
    w.token("<WEIGHTS>")
    w.vector(gmm.weights)
    w.token("<MEANS_INVVARS>")
    w.matrix(gmm.means_invvars)
    w.token("<INV_VARS>")
    w.matrix(gmm.inv_vars)
    w.token("</DiagGMM>")
    w.newline()
    return w.getvalue()


def extractor_bytes(ie: IvectorExtractor, binary: bool = True) -> bytes:
    w = KaldiWriter(binary)
    w.token("<IvectorExtractor>")
    w.token("<w>")
    w.matrix(np.zeros((0, 0)), double=True)
    w.token("<w_vec>")
    w.vector(ie.w_vec, double=True)
    w.token("<M>")
    w.int32(ie.num_gauss)
    for m in ie.M:
        w.matrix(m, double=True)
    w.token("<SigmaInv>")
    for s in ie.Sigma_inv:
        w.packed(0.5 * (s + s.T), double=True)
    w.token("<IvectorOffset>")
    w.float64(ie.prior_offset)
    w.token("</IvectorExtractor>")
    return w.getvalue()


def write_ivector_extractor_dir(
    out_dir: str | Path,
    pipeline: IvectorFeaturePipeline,
    ubm: DiagGmm,
    extractor: IvectorExtractor,
    binary: bool = True,
) -> dict[str, Path]:
    """Write the extractor files into ``out_dir``; returns their paths by role."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "lda_matrix": out / "final.mat",
        "global_cmvn_stats": out / "global_cmvn.stats",
        "cmvn_config": out / "online_cmvn.conf",
        "splice_config": out / "splice.conf",
        "diag_ubm": out / "final.dubm",
        "ivector_extractor": out / "final.ie",
    }
    w = KaldiWriter(binary)
    w.matrix(pipeline.transform)
    _write(paths["lda_matrix"], w)
    w = KaldiWriter(binary)
    w.matrix(pipeline.global_cmvn, double=True)
    _write(paths["global_cmvn_stats"], w)
    o = pipeline.cmvn_opts
    write_text_atomic(
        paths["cmvn_config"],
        f"--cmn-window={o.cmn_window}\n--speaker-frames={o.speaker_frames}\n"
        f"--global-frames={o.global_frames}\n--norm-means=true\n"
        "--norm-vars=false\n",
    )
    c = pipeline.context
    write_text_atomic(out / "splice_opts", f"--left-context={c} --right-context={c}\n")
    write_text_atomic(paths["splice_config"], f"--left-context={c}\n--right-context={c}\n")
    for key, data in (
        ("diag_ubm", dubm_bytes(ubm, binary)),
        ("ivector_extractor", extractor_bytes(extractor, binary)),
    ):
        with atomic_path(paths[key]) as tmp:
            tmp.write_bytes(data)
    return paths
