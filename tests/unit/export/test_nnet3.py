"""The TDNN as an nnet3 network: the file Kaldi reads, and the same outputs as paravg."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import FEAT_DIM, IVECTOR_DIM, random_model

from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3 import compute, nnet3_from_model, read_nnet3, write_nnet3


def _bytes(nnet, binary):
    w = KaldiWriter(binary)
    write_nnet3(w, nnet)
    return w.getvalue()


def test_config_lines_are_kaldis_xconfig_network():
    nnet = nnet3_from_model(random_model())
    lines = nnet.config_lines
    assert lines[0] == f"input-node name=input dim={FEAT_DIM}"
    assert lines[1] == f"input-node name=ivector dim={IVECTOR_DIM}"
    assert lines[2] == (
        "component-node name=lda component=lda input=Append(Offset(input, -2), "
        "Offset(input, -1), input, Offset(input, 1), Offset(input, 2), "
        "ReplaceIndex(ivector, t, 0))"
    )
    assert (
        "input=Append(Offset(tdnn1.renorm, -1), tdnn1.renorm, Offset(tdnn1.renorm, 1))"
        in (lines[6])
    )
    assert lines[-1] == "output-node name=output input=output.log-softmax objective=linear"
    kinds = [c.kind for c in nnet.components]
    assert kinds[0] == "FixedAffineComponent"
    assert kinds[1:4] == [
        "NaturalGradientAffineComponent", "RectifiedLinearComponent", "NormalizeComponent",
    ]  # fmt: skip
    assert kinds[-1] == "LogSoftmaxComponent"
    assert nnet.output_dim() == 40


def test_file_starts_and_nonlinear_fields():
    nnet = nnet3_from_model(random_model())
    text, binary = _bytes(nnet, False), _bytes(nnet, True)
    assert text.startswith(b"<Nnet3> \n")
    assert binary.startswith(b"\0B<Nnet3> \n")
    relu = text[text.index(b"<RectifiedLinearComponent>") :]
    relu = relu[: relu.index(b"</RectifiedLinearComponent>")]
    for field in (b"<Dim>", b"<ValueAvg>", b"<DerivAvg>", b"<Count>"):
        assert field in relu
    assert len(binary) < 0.5 * len(text)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("ivector_dim", [0, IVECTOR_DIM])
def test_read_back_computes_what_paravg_computes(binary, ivector_dim):
    model = random_model(ivector_dim)
    nnet = read_nnet3(KaldiReader(_bytes(nnet3_from_model(model), binary)))
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((30, FEAT_DIM)).astype(np.float32)
    iv = rng.standard_normal(ivector_dim).astype(np.float32) if ivector_dim else None
    ours = compute(nnet, feats, iv)
    with torch.no_grad():
        ivt = torch.from_numpy(iv)[None] if ivector_dim else None
        theirs = model(torch.from_numpy(feats)[None], ivt)[0].double().numpy()
    assert ours.shape == theirs.shape == (30 - model.left_context - model.right_context, 40)
    np.testing.assert_allclose(ours, theirs, atol=2e-4)
