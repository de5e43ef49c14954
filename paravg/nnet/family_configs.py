"""What each model family's config says without building the model (torch-free): its
context, the size of its state dict, and its config checks.

The entries of :data:`paravg.nnet.families.FAMILIES` point here; the model classes
(:mod:`paravg.nnet.tdnn`, :mod:`paravg.nnet.tdnnf`, :mod:`paravg.nnet.lstm`) build the
networks these functions describe, and the unit tests of each family check that the
numbers agree with the built model (``nnet3-info``'s ``left-context``/``right-context``
in Kaldi, which ``steps/nnet3/get_egs.sh`` cuts every eg with).

Context (offsets relative to the output frame; negative = past)::

    left  = −min(input_splice) + Σ_layers −min(splice)
    right =  max(input_splice) + Σ_layers  max(splice)

TDNN-F: a ``tdnnf-layer`` of time stride s adds s on each side (tdnn1 and the prefinal
layers none). TDNN-LSTM: the ``tdnn`` layers' splices, plus ``output_delay`` on the
right; the LSTM recurrences (``IfDefined``) add none, as ``nnet3-info`` computes it.
"""

from __future__ import annotations

from paravg.errors import ConfigError


def _splice_context(splices: list[list[int]]) -> tuple[int, int]:
    left = sum(max(0, -min(s)) for s in splices)
    right = sum(max(0, max(s)) for s in splices)
    return left, right


def _lda_dim(model_cfg: dict, feat_dim: int, ivector_dim: int) -> int:
    return feat_dim * len(model_cfg["input_splice"]) + ivector_dim


# ============================================================================ tdnn


def tdnn_context(model_cfg: dict) -> tuple[int, int]:
    """The TDNN's context: the input splice and every hidden layer's splice."""
    return _splice_context(
        [model_cfg["input_splice"]] + [layer.get("splice", [0]) for layer in model_cfg["hidden"]]
    )


def tdnn_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """The size of a TDNN's float32 parameters and buffers in MB (2^20 bytes): the fixed
    LDA-like transform (d² + d, d = feat_dim · |input splice| + ivector_dim), every affine
    layer ((in · |splice| + 1) · out), the output layer and the log-priors
    (:class:`paravg.nnet.tdnn.TdnnModel`'s state dict)."""
    lda = _lda_dim(model_cfg, feat_dim, ivector_dim)
    values, prev = lda * lda + lda + num_targets, lda
    for layer in model_cfg["hidden"]:
        values += (prev * len(layer.get("splice", [0])) + 1) * layer["dim"]
        prev = layer["dim"]
    values += (prev + 1) * num_targets
    return 4 * values / 2**20


# ============================================================================ tdnnf


def tdnnf_context(model_cfg: dict) -> tuple[int, int]:
    """The TDNN-F's context: the input splice, plus s on each side per stride s."""
    splice = model_cfg["input_splice"]
    strides = sum(max(0, s) for s in model_cfg["tdnnf"]["time_strides"])
    return max(0, -min(splice)) + strides, max(0, max(splice)) + strides


def tdnnf_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """:class:`paravg.nnet.tdnnf.TdnnfModel`'s state dict: float32 weights and biases,
    float64 batch-norm statistics (2 D + 1 per batch-norm)."""
    c = model_cfg["tdnnf"]
    lda = _lda_dim(model_cfg, feat_dim, ivector_dim)
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


def check_tdnnf(model_cfg: dict, where: str) -> None:
    """The first tdnnf layer's bypass adds tdnn1's output: tdnn1_dim = dim (Kaldi's
    xconfig refuses the mismatch when the network is built)."""
    f = model_cfg["tdnnf"]
    if f["time_strides"] and f["bypass_scale"] and f["tdnn1_dim"] != f["dim"]:
        raise ConfigError(
            f"{where}.model.tdnnf: tdnn1_dim ({f['tdnn1_dim']}) must equal dim "
            f"({f['dim']}): the first tdnnf layer's bypass adds tdnn1's output (or set "
            "bypass_scale: 0)"
        )


# ============================================================================ tdnn_lstm

#: the keys of each layer type of ``model.tdnn_lstm.layers`` and the one it needs
LAYER_KEYS = {
    "tdnn": {"type", "name", "dim", "splice"},
    "lstm": {
        "type",
        "name",
        "cell_dim",
        "recurrent_projection_dim",
        "non_recurrent_projection_dim",
        "delay",
        "decay_time",
        "clipping_threshold",
        "zeroing_threshold",
        "zeroing_interval",
        "max_change",
        "nonlinearity_max_change",
        "self_repair_scale_nonlinearity",
        "l2_regularize",
    },
}
LAYER_NEEDS = {"tdnn": "dim", "lstm": "cell_dim"}


def check_layers(cfg: dict) -> list[dict]:
    """``model.tdnn_lstm.layers``, checked: each a ``tdnn`` or ``lstm`` entry with known
    keys (see :class:`paravg.nnet.lstm.TdnnLstmModel`)."""
    layers = cfg.get("layers")
    if not layers:
        raise ConfigError("model.tdnn_lstm.layers: expected a non-empty list of layers")
    for k, layer in enumerate(layers):
        kind = layer.get("type")
        if kind not in LAYER_KEYS:
            raise ConfigError(
                f"model.tdnn_lstm.layers[{k}].type = {kind!r}; expected 'tdnn' or 'lstm'"
            )
        unknown = sorted(set(layer) - LAYER_KEYS[kind])
        if unknown:
            raise ConfigError(
                f"model.tdnn_lstm.layers[{k}]: unknown key(s) {unknown} for a {kind} layer; "
                f"known: {sorted(LAYER_KEYS[kind])}"
            )
        need = LAYER_NEEDS[kind]
        if need not in layer:
            raise ConfigError(f"model.tdnn_lstm.layers[{k}]: a {kind} layer needs {need}")
    delay = cfg.get("output_delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise ConfigError(f"model.tdnn_lstm.output_delay = {delay!r}; expected an integer >= 0")
    return list(layers)


def tdnn_lstm_context(model_cfg: dict) -> tuple[int, int]:
    """The TDNN-LSTM's context: the input splice and the ``tdnn`` layers' splices, plus
    ``output_delay`` on the right (the recurrences add none)."""
    cfg = model_cfg["tdnn_lstm"]
    left, right = _splice_context(
        [model_cfg["input_splice"]]
        + [layer.get("splice", [0]) for layer in cfg["layers"] if layer["type"] == "tdnn"]
    )
    return left, right + int(cfg.get("output_delay", 0))


def tdnn_lstm_megabytes(
    model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int
) -> float:
    """:class:`paravg.nnet.lstm.TdnnLstmModel`'s state dict: in float32 the LDA-like
    transform and log-priors, every relu-renorm affine ((in · |splice| + 1) · D), every
    fast-lstmp layer (W_all (in + R + 1) · 4C, the 3C peepholes, W_rp (C + 1) · (R + P);
    R defaults to C/4 and P to R, as Kaldi's) and the output affine; in float64 each
    nonlinearity's statistics (value and derivative sums 2 · 5C, 5 repaired counts, the
    count)."""
    lda = _lda_dim(model_cfg, feat_dim, ivector_dim)
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
