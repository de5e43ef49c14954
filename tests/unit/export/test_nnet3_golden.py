"""The whole nnet3 file of every family, text and binary, against the sha256 recorded
from the writer before it became a package (paravg/export/nnet3.py at fadf25e): a change
of any byte the export writes (a field, its order, a number's printing, a node line)
fails here, in every component kind and descriptor the builders use.

Every parameter and statistic of the models is set from an integer pattern (multiples
of 1/64, exact in float32; the statistics' means and variances elementwise IEEE
arithmetic), so the bytes are the same on every machine: no BLAS, no random draw."""

from __future__ import annotations

import hashlib

import pytest
import torch
from export_models import (
    FEAT_DIM,
    IVECTOR_DIM,
    MODEL_CFG,
    NUM_TARGETS,
    TDNNF_CFG,
    lstm_cfg,
    nnet3_bytes,
)

from paravg.export.nnet3 import NgOptions, nnet3_from_model
from paravg.nnet.model_file import new_model


def patterned_model(cfg: dict):
    """The family's model with every tensor of its state set from an integer pattern:
    weights and sums in [-0.75, 0.75] by 1/64, counts 8, sums of squares that give
    variances > 0."""
    model = new_model(cfg, FEAT_DIM, IVECTOR_DIM, NUM_TARGETS)
    with torch.no_grad():
        for i, (name, t) in enumerate(sorted(model.state_dict().items())):
            k = torch.arange(t.numel(), dtype=torch.float64)
            if name.endswith("count"):
                v = torch.full_like(k, 8.0)
            elif name.endswith(("sumsq", "self_repair_total")):
                v = 8.0 * (((k * 13 + i) % 29 + 1) / 16)
            else:
                v = ((k * 37 + 11 * i) % 97 - 48) / 64
            t.copy_(v.reshape(t.shape))
    return model.eval()


def _sha256(nnet, binary: bool) -> str:
    return hashlib.sha256(nnet3_bytes(nnet, binary)).hexdigest()


MODELS = {
    "tdnn": {**MODEL_CFG, "family": "tdnn"},
    "tdnnf": TDNNF_CFG,
    "tdnn_lstm": lstm_cfg(output_delay=2),
    "lstm_d0": lstm_cfg(output_delay=0),
}
# (model, NgOptions and learning rate or the defaults, binary) -> sha256 of the file
GOLDEN = {
    "tdnn/default/text": "8ce5919a0dbe98f3e3be06069312b5815f359fda1d251e96e62f63f1929b5e6b",
    "tdnn/default/binary": "5b4659caf40e632c9971ff03fdd3f5d8f7f9bcfc8affa310c8b0700294e71b80",
    "tdnn/ng/text": "0c01c1ffaba7c912d4804afdae2d4b22333857b5c6f2b1ace53fadd1b50081c9",
    "tdnn/ng/binary": "6b70b3f7b7038604daa384423e59422d502a3fcadc66a30121187f04635445de",
    "tdnnf/default/text": "f765d32b784c3c3a7c7c2ed262b4ef35daace04b87f3410352c7ab458c08b6c6",
    "tdnnf/default/binary": "45c2924fd682ff182a62c43a5363021f4298bacae60ea3ec4ca6ea2ccf6d0ee5",
    "tdnnf/ng/text": "48a802c234439ab61e494aa896386c6230beb4f44fd706f1ed9ff8a7ce93f6f7",
    "tdnnf/ng/binary": "611652db7abca6c898fb8cc6719cd2f1d283f9203aa4af21ebf5a2fe0fadf68e",
    "tdnn_lstm/default/text": "66fb5fe9619bca457513c318a6445fd462b2e0f92f35bd5d7ba15d6ce618ef88",
    "tdnn_lstm/default/binary": "72894110d1c5f5675bb0fa935e18afed50a630b115e6165e2403c994465e2e4c",
    "tdnn_lstm/ng/text": "4af1dfd93acd8d2ecd11ca2028488d2640ae863bd0867d27dbeee63c4f5d1190",
    "tdnn_lstm/ng/binary": "4b5d4131bed17d0e13acce26c3bea6c6f31b542b15b4433b03532880c928a7d0",
    "lstm_d0/default/text": "dde9c86e9df075b856a04a104bb9317ec95ae5412455defe5699430f1b4d2b9e",
    "lstm_d0/default/binary": "35c551de9e58fbbae487c7da8c652a0400c7ef9556a7ef15fef2c6f767c16ecd",
    "lstm_d0/ng/text": "2b60dd3508707bdbde6a68348f320511009bd26640af465463ce89a7a0d3d180",
    "lstm_d0/ng/binary": "5ea2133a4d3131a2ec0321c7d45f63dcb650d28a6ff1bef7b8ac87c9d21c2df9",
}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("ng", [False, True], ids=["default", "ng"])
@pytest.mark.parametrize("name", list(MODELS))
def test_the_file_of_every_family_is_the_recorded_bytes(name, ng, binary):
    model = patterned_model(MODELS[name])
    if ng:
        nnet = nnet3_from_model(model, 0.001, NgOptions(7, 9, 3, 1000.0, 2.5))
    else:
        nnet = nnet3_from_model(model)
    key = f"{name}/{'ng' if ng else 'default'}/{'binary' if binary else 'text'}"
    assert _sha256(nnet, binary) == GOLDEN[key]
