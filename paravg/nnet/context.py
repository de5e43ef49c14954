"""Model context: how many input frames left and right of an output frame a model needs.

Kaldi computes this from the network (``nnet3-info`` ``left-context``/``right-context``)
and ``steps/nnet3/get_egs.sh`` cuts every eg with it. Here it is a pure function of the
model config: the input splice plus each hidden layer's splice offsets add up.
"""

from __future__ import annotations


def model_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """The size of a model's parameters and buffers in MB (2^20 bytes), by family."""
    if model_cfg.get("family", "tdnn") == "tdnnf":
        return _tdnnf_megabytes(model_cfg, feat_dim, ivector_dim, num_targets)
    return _tdnn_megabytes(model_cfg, feat_dim, ivector_dim, num_targets)


def _tdnnf_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """:class:`paravg.nnet.tdnnf.TdnnfModel`'s state dict: float32 weights and biases,
    float64 batch-norm statistics (2 D + 1 per batch-norm)."""
    c = model_cfg["tdnnf"]
    lda = feat_dim * len(model_cfg["input_splice"]) + ivector_dim
    floats, doubles = lda * lda + lda + num_targets, 0
    d1, d, b = c["tdnn1_dim"], c["dim"], c["bottleneck_dim"]
    floats += (lda + 1) * d1
    doubles += 2 * d1 + 1
    for stride in c["time_strides"]:
        k = 2 if stride > 0 else 1
        floats += d * k * b + (b * k + 1) * d
        doubles += 2 * d + 1
    last = d if c["time_strides"] else d1
    lin, big, small = c["linear_dim"], c["prefinal_big_dim"], c["prefinal_small_dim"]
    floats += last * lin + (lin + 1) * big + big * small + (small + 1) * num_targets
    doubles += 2 * big + 1 + 2 * small + 1
    return (4 * floats + 8 * doubles) / 2**20


def _tdnn_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
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

    TDNN-F (``family: tdnnf``): the input splice, plus s frames on each side for each
    ``tdnnf-layer`` of time stride s (:mod:`paravg.nnet.tdnnf`; tdnn1 and the prefinal
    layers add none).

    left = -min(input_splice) + sum over hidden layers of -min(splice)
    right = max(input_splice) + sum over hidden layers of max(splice)
    (offsets are relative to the output frame; negative = past).
    """
    if model_cfg.get("family", "tdnn") == "tdnnf":
        splice = model_cfg["input_splice"]
        strides = sum(max(0, s) for s in model_cfg["tdnnf"]["time_strides"])
        return max(0, -min(splice)) + strides, max(0, max(splice)) + strides
    splices = [model_cfg["input_splice"]] + [
        layer.get("splice", [0]) for layer in model_cfg["hidden"]
    ]
    left = sum(max(0, -min(s)) for s in splices)
    right = sum(max(0, max(s)) for s in splices)
    return left, right
