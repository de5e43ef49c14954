"""Small models for the export tests: a random TDNN with i-vectors; a network as the
bytes of its nnet3 file."""

from __future__ import annotations

import torch

from paravg.export.kaldi_stream import KaldiWriter
from paravg.export.nnet3 import Nnet3, write_nnet3
from paravg.nnet.tdnn import TdnnModel

FEAT_DIM, IVECTOR_DIM, NUM_TARGETS = 40, 6, 40
MODEL_CFG = {
    "hidden": [{"dim": 24, "splice": [0]}, {"dim": 24, "splice": [-1, 0, 1]}],
    "input_splice": [-2, -1, 0, 1, 2],
    "max_change_hidden": 0.75,
    "max_change_output": 1.5,
}


def random_model(ivector_dim: int = IVECTOR_DIM, seed: int = 0) -> TdnnModel:
    model = TdnnModel(MODEL_CFG, FEAT_DIM, ivector_dim, NUM_TARGETS)
    model.init_parameters(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.output.weight.copy_(torch.randn(model.output.weight.shape, generator=gen))
        model.output.bias.copy_(torch.randn(NUM_TARGETS, generator=gen))
        model.lda_weight.copy_(torch.randn(model.lda_weight.shape, generator=gen) * 0.1)
        model.lda_bias.copy_(torch.randn(model.lda_dim, generator=gen))
        priors = torch.rand(NUM_TARGETS, generator=gen) + 0.1
        model.log_priors.copy_((priors / priors.sum()).log())
    model.eval()
    return model


def nnet3_bytes(nnet: Nnet3, binary: bool) -> bytes:
    """The network's file as paravg's writer writes it (binary or text)."""
    w = KaldiWriter(binary)
    write_nnet3(w, nnet)
    return w.getvalue()
