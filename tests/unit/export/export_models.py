"""Small models for the export tests: a random TDNN with i-vectors, the export's
TDNN-F and TDNN-LSTM configs and a random TDNN-F in eval mode; 1.5 s of test audio; a
network as the bytes of its nnet3 file, and the check of hand-written components."""

from __future__ import annotations

import wave

import numpy as np
import torch
from kaldi_bytes import i32, tok

from paravg.export.kaldi_stream import KaldiWriter
from paravg.export.nnet3 import Nnet3, write_nnet3
from paravg.nnet.model_file import new_model
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import (
    lstm_layer,
    random_head,
    random_lda,
    standardising_lda,
    tdnn_config,
    tdnn_layer,
    tdnn_lstm_config,
    tdnnf_config,
)

FEAT_DIM, IVECTOR_DIM, NUM_TARGETS = 40, 6, 40
MODEL_CFG = tdnn_config((24, [0]), (24, [-1, 0, 1]))
#: the export tests' TDNN-F: tdnn1 and 4 tdnnf layers (strides 1, 1, 0, 3) of 64 / 16
TDNNF_CFG = tdnnf_config(
    64, 16, [1, 1, 0, 3], linear_dim=16, prefinal=(64, 16), self_repair_scale=1e-5
)
SAMPLE_RATE = 16000


def lstm_cfg(output_delay: int = 2, decay_time: int = 20) -> dict:
    """The export tests' TDNN-LSTM: two TDNN layers of 32, an LSTM (cell 16, projections
    4 + 6), a stride-3 TDNN layer, an LSTM (cell 12, projections 4 + 8)."""
    return tdnn_lstm_config(
        tdnn_layer(32),
        tdnn_layer(32, [-1, 0, 1]),
        lstm_layer(16, 4, non_recurrent_projection_dim=6, decay_time=decay_time),
        tdnn_layer(32, [-3, 0, 3]),
        lstm_layer(12, 4, non_recurrent_projection_dim=8, decay_time=decay_time),
        output_delay=output_delay,
        self_repair_scale=1e-5,
    )


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


def tdnnf_model(
    cfg=TDNNF_CFG,
    ivector_dim=IVECTOR_DIM,
    seed=0,
    stats_feats=None,
    stats_ivectors=None,
    num_targets=NUM_TARGETS,
):
    """A random TDNN-F in eval mode: Kaldi's initialisation, a random output layer,
    priors and LDA-like transform, and batch-norm statistics from training-mode forwards
    (on ``stats_feats`` where given: the network's input then has the scale it has in
    use)."""
    model = new_model(cfg, FEAT_DIM, ivector_dim, num_targets)
    model.init_parameters(seed)
    gen = random_head(model, seed)
    if stats_feats is None:
        random_lda(model, gen)
    else:  # standardise the features; the i-vector part 3 x
        standardising_lda(model, stats_feats, cfg["input_splice"])
    model.train()
    with torch.no_grad():
        if stats_feats is None:
            for _ in range(3):
                x = torch.randn(4, 40, FEAT_DIM, generator=gen) * 2 + 1
                iv = torch.randn(4, ivector_dim, generator=gen) if ivector_dim else None
                model(x, iv)
        else:
            iv = None if stats_ivectors is None else torch.from_numpy(stats_ivectors)[None]
            model(torch.from_numpy(np.asarray(stats_feats, np.float32))[None], iv)
    return model.eval()


def tone_audio(tmp_path):
    """1.5 s of tones that change every 80 ms over noise (148 MFCC frames), as a wav
    file and samples."""
    rng = np.random.default_rng(0)
    n = int(1.5 * SAMPLE_RATE)
    freqs = rng.uniform(200, 3000, size=n // 1280 + 1)[np.arange(n) // 1280]
    signal = np.sin(2 * np.pi * np.cumsum(freqs) / SAMPLE_RATE) * 4000
    samples = np.round(signal + rng.standard_normal(n) * 300).astype(np.int16)
    path = tmp_path / "a.wav"
    with wave.open(str(path), "w") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(SAMPLE_RATE)
        f.writeframes(samples.astype("<i2").tobytes())
    return str(path), samples


def component_bytes(data: bytes, name: str) -> bytes:
    """What follows ``<ComponentName> name`` up to the next component or the end."""
    start = data.index(b"<ComponentName> " + name.encode() + b" ") + len(name) + 17
    end = data.find(b"<ComponentName> ", start)
    return data[start : end if end >= 0 else data.index(b"</Nnet3>", start)]


def assert_written_as_by_hand(nnet: Nnet3, config: list[str], text: dict, binary: dict):
    """paravg's writer against Kaldi's formats worked out by hand: the config lines, then
    every component's bytes, text (``text``: name -> str) and binary (name -> bytes)."""
    assert nnet.config_lines == config
    as_text, as_binary = nnet3_bytes(nnet, False), nnet3_bytes(nnet, True)
    assert as_text.startswith(b"<Nnet3> \n" + "".join(f"{x}\n" for x in config).encode() + b"\n")
    for name, expected in text.items():
        assert component_bytes(as_text, name) == expected.encode(), name
    for name, expected in binary.items():
        assert component_bytes(as_binary, name) == expected, name


def one_component_file(name: str, body: bytes, binary: bool) -> bytes:
    """An nnet3 file of the one component ``name`` whose bytes after its name are ``body``."""
    data = (b"\0B" if binary else b"") + tok("<Nnet3>") + b"\n\n" + tok("<NumComponents>")
    data += (i32(1) if binary else b"1 \n") + tok("<ComponentName>", name) + body
    return data + tok("</Nnet3>")
