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
    if model_cfg.get("family", "tdnn") == "tdnn_lstm":
        return _tdnn_lstm_megabytes(model_cfg, feat_dim, ivector_dim, num_targets)
    return _tdnn_megabytes(model_cfg, feat_dim, ivector_dim, num_targets)


def _tdnn_lstm_megabytes(
    model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int
) -> float:
    """:class:`paravg.nnet.lstm.TdnnLstmModel`'s state dict: in float32 the LDA-like
    transform and log-priors, every relu-renorm affine ((in · |splice| + 1) · D), every
    fast-lstmp layer (W_all (in + R + 1) · 4C, the 3C peepholes, W_rp (C + 1) · (R + P);
    R defaults to C/4 and P to R, as Kaldi's) and the output affine; in float64 each
    nonlinearity's statistics (value and derivative sums 2 · 5C, 5 repaired counts, the
    count)."""
    lda = feat_dim * len(model_cfg["input_splice"]) + ivector_dim
    values, prev, stats = lda * lda + lda + num_targets, lda, 0
    for layer in model_cfg["tdnn_lstm"]["layers"]:
        if layer["type"] == "tdnn":
            values += (prev * len(layer.get("splice", [0])) + 1) * layer["dim"]
            prev = layer["dim"]
            continue
        c = layer["cell_dim"]
        r = layer.get("recurrent_projection_dim", 0) or c // 4
        p = layer.get("non_recurrent_projection_dim", 0) or r
        values += (prev + r + 1) * 4 * c + 3 * c + (c + 1) * (r + p)
        stats += 2 * 5 * c + 5 + 1
        prev = r + p
    values += (prev + 1) * num_targets
    return (4 * values + 8 * stats) / 2**20


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


def frame_subsampling_factor(model_cfg: dict) -> int:
    """``model.frame_subsampling_factor`` f ≥ 1: the network has an output every f input
    frames (a low frame rate; absent: 1, every 10-ms frame an output). The context above
    is in input frames whatever f is."""
    f = model_cfg.get("frame_subsampling_factor", 1)
    if isinstance(f, float) and f.is_integer():  # YAML's 3.0, which the schema takes
        f = int(f)
    if isinstance(f, bool) or not isinstance(f, int) or f < 1:
        raise ValueError(f"model.frame_subsampling_factor must be an integer >= 1, got {f!r}")
    return f


def model_context(model_cfg: dict) -> tuple[int, int]:
    """Return ``(left_context, right_context)`` in frames for a model config.

    TDNN-F (``family: tdnnf``): the input splice, plus s frames on each side for each
    ``tdnnf-layer`` of time stride s (:mod:`paravg.nnet.tdnnf`; tdnn1 and the prefinal
    layers add none).

    TDNN-LSTM (``family: tdnn_lstm``, :mod:`paravg.nnet.lstm`): the input splice and the
    splices of the ``tdnn`` layers as below, plus ``output_delay`` on the right; the LSTM
    layers' recurrences (``IfDefined``) add none, as Kaldi's ``nnet3-info`` computes it.

    left = -min(input_splice) + sum over hidden layers of -min(splice)
    right = max(input_splice) + sum over hidden layers of max(splice)
    (offsets are relative to the output frame; negative = past).
    """
    if model_cfg.get("family", "tdnn") == "tdnnf":
        splice = model_cfg["input_splice"]
        strides = sum(max(0, s) for s in model_cfg["tdnnf"]["time_strides"])
        return max(0, -min(splice)) + strides, max(0, max(splice)) + strides
    if model_cfg.get("family", "tdnn") == "tdnn_lstm":
        cfg = model_cfg["tdnn_lstm"]
        splices = [model_cfg["input_splice"]] + [
            layer.get("splice", [0]) for layer in cfg["layers"] if layer["type"] == "tdnn"
        ]
        left = sum(max(0, -min(s)) for s in splices)
        right = sum(max(0, max(s)) for s in splices) + int(cfg.get("output_delay", 0))
        return left, right
    splices = [model_cfg["input_splice"]] + [
        layer.get("splice", [0]) for layer in model_cfg["hidden"]
    ]
    left = sum(max(0, -min(s)) for s in splices)
    right = sum(max(0, max(s)) for s in splices)
    return left, right
