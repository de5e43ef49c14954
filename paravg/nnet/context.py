"""Model context: how many input frames left and right of an output frame a model needs.

Kaldi computes this from the network (``nnet3-info`` ``left-context``/``right-context``)
and ``steps/nnet3/get_egs.sh`` cuts every eg with it. Here it is a pure function of the
model config: the input splice plus each hidden layer's splice offsets add up.
"""

from __future__ import annotations


def model_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """The size of a TDNN's float32 parameters and buffers in MB (2^20 bytes): the fixed
    LDA-like transform (d² + d, d = feat_dim · |input splice| + ivector_dim), every affine
    layer ((in · |splice| + 1) · out), the output layer and the log-priors
    (:class:`paravg.nnet.tdnn.TdnnModel`'s state dict)."""
    lda = feat_dim * len(model_cfg["input_splice"]) + ivector_dim
    values, prev = lda * lda + lda + num_targets, lda
    for layer in model_cfg["hidden"]:
        values += (prev * len(layer.get("splice", [0])) + 1) * layer["dim"]
        prev = layer["dim"]
    values += (prev + 1) * num_targets
    return 4 * values / 2**20


def model_context(model_cfg: dict) -> tuple[int, int]:
    """Return ``(left_context, right_context)`` in frames for a model config.

    left = -min(input_splice) + sum over hidden layers of -min(splice)
    right = max(input_splice) + sum over hidden layers of max(splice)
    (offsets are relative to the output frame; negative = past).
    """
    splices = [model_cfg["input_splice"]] + [
        layer.get("splice", [0]) for layer in model_cfg["hidden"]
    ]
    left = sum(max(0, -min(s)) for s in splices)
    right = sum(max(0, max(s)) for s in splices)
    return left, right
