"""Model context: how many input frames left and right of an output frame a model needs.

Kaldi computes this from the network (``nnet3-info`` ``left-context``/``right-context``)
and ``steps/nnet3/get_egs.sh`` cuts every eg with it. Here it is a pure function of the
model config, by family (:data:`paravg.nnet.families.FAMILIES`; each family's function in
:mod:`paravg.nnet.family_configs`): the input splice plus each hidden layer's splice
offsets add up.
"""

from __future__ import annotations

from paravg.nnet.families import family_of


def model_megabytes(model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int) -> float:
    """The size of a model's parameters and buffers in MB (2^20 bytes), by family."""
    return family_of(model_cfg).megabytes(model_cfg, feat_dim, ivector_dim, num_targets)


def model_objective(model_cfg: dict) -> str:
    """``model.objective``: ``xent`` (absent; cross-entropy on frame targets) or ``chain``
    (LF-MMI, :mod:`paravg.chain`: the TDNN-F's ``output`` without softmax and an
    ``output-xent`` branch)."""
    objective = model_cfg.get("objective", "xent")
    if objective not in ("xent", "chain"):
        raise ValueError(f"model.objective must be xent or chain, got {objective!r}")
    return objective


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
    """Return ``(left_context, right_context)`` in frames for a model config, by family
    (:mod:`paravg.nnet.family_configs`): the input splice and every hidden layer's splice
    (a TDNN-F's time strides, a TDNN-LSTM's ``tdnn`` layers and output delay)::

        left = -min(input_splice) + sum over hidden layers of -min(splice)
        right = max(input_splice) + sum over hidden layers of max(splice)

    (offsets are relative to the output frame; negative = past).
    """
    return family_of(model_cfg).context(model_cfg)


def egs_context_of(model_cfg: dict) -> tuple[int, int]:
    """The context an eg must carry for this model: :func:`model_context`, plus for a
    chain model ``f // 2`` frames each side for the jobs' frame shifts
    (``steps/nnet3/chain/get_egs.sh``: ``left_context + frame_subsampling_factor / 2``,
    so that ``nnet3-chain-copy-egs --frame-shift`` moves the input by up to ``f // 2``
    frames either way; :func:`paravg.chain.train.frame_shift_offset`)."""
    left, right = model_context(model_cfg)
    if model_objective(model_cfg) == "chain":
        half = frame_subsampling_factor(model_cfg) // 2
        left, right = left + half, right + half
    return left, right
