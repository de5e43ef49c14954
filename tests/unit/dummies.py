"""Seeded tiny models and their configs, one copy for every unit test that needs one.

The three model families (TDNN, TDNN-F, TDNN-LSTM) as small networks of the shape
Kaldi's xconfigs make (``steps/libs/nnet3/xconfig``: ``relu-renorm-layer``,
``tdnnf-layer``, ``fast-lstmp-layer``), with the trainer's max-change defaults
(``train_dnn.py``: 0.75 per hidden component, 1.5 for the output). A test names only what
it varies (widths, splices, strides, layers); everything else is the default here.

A model is built as paravg builds it (:func:`paravg.nnet.model_file.new_model`, the
family read from the config) and initialised with Kaldi's seeded initialisation
(``init_parameters(seed)``); Kaldi's output layer starts at zero, so a test whose frames
must differ gives it random weights (:func:`with_output`) or a random head
(:func:`random_head`: output weights and bias, priors).

Import it as ``from tests.unit.dummies import ...`` (the repository root is on the path
of every test run).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch

from paravg.nnet.affine import plain_affine_factory
from paravg.nnet.model_file import new_model
from paravg.plan import JobSpec

#: feature, i-vector and output dimensions of the tiny models
FEAT, IVEC, TARGETS = 5, 3, 7
#: the per-component max-change of train_dnn.py's defaults
MAX_CHANGE = {"max_change_hidden": 0.75, "max_change_output": 1.5}


def tdnn_config(
    *hidden: tuple[int, Sequence[int]], input_splice: Sequence[int] = (-2, -1, 0, 1, 2), **extra
) -> dict:
    """A TDNN: the input splice, then one ``relu-renorm-layer`` per ``(dim, splice)``."""
    return {
        "input_splice": list(input_splice),
        "hidden": [{"dim": dim, "splice": list(splice)} for dim, splice in hidden],
        **MAX_CHANGE,
        **extra,
    }


def tdnnf_config(
    dim: int = 12,
    bottleneck_dim: int = 4,
    time_strides: Sequence[int] = (1, 0, 3),
    *,
    linear_dim: int = 4,
    prefinal: tuple[int, int] = (10, 6),
    bypass_scale: float = 0.66,
    l2: tuple[float, float] = (0.01, 0.002),
    input_splice: Sequence[int] = (-1, 0, 1),
    **extra,
) -> dict:
    """A TDNN-F (``run_tdnn_1*.sh``'s chain network): tdnn1 of ``dim``, one ``tdnnf-layer``
    of ``dim`` / ``bottleneck_dim`` per time stride, the prefinal layer (``prefinal``: big,
    small dims) after a ``linear_dim`` linear component; ``l2``: the hidden and output
    l2-regularize."""
    return {
        "family": "tdnnf",
        "input_splice": list(input_splice),
        **MAX_CHANGE,
        **extra,
        "tdnnf": {
            "tdnn1_dim": dim,
            "dim": dim,
            "bottleneck_dim": bottleneck_dim,
            "time_strides": list(time_strides),
            "bypass_scale": bypass_scale,
            "l2_regularize": l2[0],
            "output_l2_regularize": l2[1],
            "linear_dim": linear_dim,
            "prefinal_big_dim": prefinal[0],
            "prefinal_small_dim": prefinal[1],
        },
    }


def tdnn_layer(dim: int = 12, splice: Sequence[int] | None = None) -> dict:
    """A TDNN-LSTM's ``relu-renorm-layer`` (no splice: its input at the same time)."""
    return {"type": "tdnn", "dim": dim} | ({} if splice is None else {"splice": list(splice)})


def lstm_layer(
    cell_dim: int = 8, recurrent_projection_dim: int = 2, delay: int = -3, **extra
) -> dict:
    """A ``fast-lstmp-layer``: ``extra`` adds e.g. the non-recurrent projection, decay time."""
    return {
        "type": "lstm",
        "cell_dim": cell_dim,
        "recurrent_projection_dim": recurrent_projection_dim,
        "delay": delay,
        **extra,
    }


def tdnn_lstm_config(
    *layers: dict, output_delay: int = 2, input_splice: Sequence[int] = (-1, 0, 1), **extra
) -> dict:
    """A TDNN-LSTM (``run_tdnn_lstm_1a.sh``): ``layers`` in order (:func:`tdnn_layer`,
    :func:`lstm_layer`), the output ``output_delay`` frames late."""
    return {
        "family": "tdnn_lstm",
        "input_splice": list(input_splice),
        **MAX_CHANGE,
        **extra,
        "tdnn_lstm": {"output_delay": output_delay, "layers": list(layers)},
    }


#: the tiny TDNN: 3 layers of 16, context (6, 6)
TINY_TDNN = tdnn_config((16, [0]), (16, [-1, 0, 1]), (16, [-3, 0, 3]))
#: the tiny TDNN-F: tdnn1, 3 tdnnf layers (strides 1, 0, 3) of 12 / 4, prefinal 10 / 6
TINY_TDNNF = tdnnf_config(self_repair_scale=1e-5)
#: the tiny TDNN-LSTM: 2 TDNN layers of 12, an LSTM (cell 8, projection 2, delay -3),
#: output delay 2; context (2, 4)
TINY_LSTM = tdnn_lstm_config(
    tdnn_layer(), tdnn_layer(splice=[-1, 0, 1]), lstm_layer(), self_repair_scale=1e-5
)


def seeded(
    cfg: dict,
    seed: int = 0,
    feat: int = FEAT,
    ivec: int = IVEC,
    targets: int = TARGETS,
    factory=plain_affine_factory,
):
    """``cfg``'s model (its family's class) with Kaldi's initialisation from ``seed``."""
    model = new_model(cfg, feat, ivec, targets, factory)
    model.init_parameters(seed)
    return model


def with_output(model, seed: int, std: float = 1.0):
    """``model`` with N(0, std²) output weights from ``seed`` (Kaldi's are zero)."""
    with torch.no_grad():
        model.output.weight.normal_(0, std, generator=torch.Generator().manual_seed(seed))
    return model


def random_head(model, seed: int, weight_scale: float = 1.0) -> torch.Generator:
    """Random output weights (N(0, weight_scale²)) and bias, and random priors, drawn in
    that order from a generator seeded ``seed + 1``; returns the generator to draw on."""
    gen = torch.Generator().manual_seed(seed + 1)
    num_targets = model.num_targets
    with torch.no_grad():
        weight = torch.randn(model.output.weight.shape, generator=gen)
        model.output.weight.copy_(weight * weight_scale)
        model.output.bias.copy_(torch.randn(num_targets, generator=gen))
        priors = torch.rand(num_targets, generator=gen) + 0.1
        model.log_priors.copy_((priors / priors.sum()).log())
    return gen


def random_lda(model, gen: torch.Generator) -> None:
    """An LDA-like input transform drawn from ``gen``: weights N(0, 0.01), bias N(0, 1)."""
    with torch.no_grad():
        model.lda_weight.copy_(torch.randn(model.lda_weight.shape, generator=gen) * 0.1)
        model.lda_bias.copy_(torch.randn(model.lda_dim, generator=gen))


def standardising_lda(model, feats: Iterable, input_splice: Sequence[int]) -> None:
    """An input transform that standardises every spliced copy of ``feats`` (per-dimension
    mean and standard deviation) and scales the i-vector part 3 x: the network's input
    then has the scale it has in use."""
    x = torch.from_numpy(np.asarray(feats, np.float32))
    mean, std = x.mean(0), x.std(0) + 1e-3
    copies = len(input_splice)
    n = x.shape[1] * copies
    weight, bias = 3.0 * torch.eye(model.lda_dim), torch.zeros(model.lda_dim)
    weight[:n, :n] = torch.diag((1 / std).repeat(copies))
    bias[:n] = -(mean / std).repeat(copies)
    with torch.no_grad():
        model.lda_weight.copy_(weight)
        model.lda_bias.copy_(bias)


def job_spec(**overrides) -> JobSpec:
    """One training job of a tiny model (iteration 3, job 1 of a run): minibatches of 16,
    learning rate 0.02, max-param-change 2, l2 factor 0.5; ``overrides`` replace any."""
    base = {
        "iteration": 3,
        "job": 1,
        "learning_rate": 0.02,
        "minibatch_size": 16,
        "max_param_change": 2.0,
        "frame": 0,
        "shuffle_buffer_size": 100,
        "l2_regularize_factor": 0.5,
    }
    return JobSpec(**{**base, **overrides})


def trained_twice(new_model, archive, spec) -> tuple:
    """``train_one_job`` on ``archive`` twice, each time from a fresh ``new_model()`` on
    the CPU: asserts that the two runs end in the same bits, returns the first model and
    its statistics."""
    from paravg.train_job import train_one_job

    runs = []
    for _ in range(2):
        model = new_model()
        runs.append((model, train_one_job(model, archive, spec, torch.device("cpu"))))
    (a, stats), (b, _) = runs
    sd_a, sd_b = a.state_dict(), b.state_dict()
    assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a), "the job is not reproducible"
    return a, stats


@torch.no_grad()
def frame_by_frame(model, feats: np.ndarray, ivectors: np.ndarray | None, period: int):
    """log p at every frame t computed alone: its own window (edge frames repeated), every
    input frame with i-vector row ⌊t / period⌋ (none: ``ivectors`` None); stacked."""
    left, right = model.left_context, model.right_context
    out = []
    for t in range(len(feats)):
        idx = np.clip(np.arange(t - left, t + right + 1), 0, len(feats) - 1)
        x = torch.from_numpy(feats[idx].astype(np.float32))[None]
        iv = None
        if ivectors is not None:
            row = ivectors[min(t // period, len(ivectors) - 1)]
            iv = torch.from_numpy(row.astype(np.float32))[None]
        out.append(model(x, iv)[0, 0])
    return torch.stack(out)


def write_jobs(directory, models, objfs) -> tuple[list, list]:
    """What the jobs of an iteration leave in ``directory``: ``job<j>.pt`` (model j's
    file) and ``job<j>.json`` (its objective); the two lists of paths."""
    import json

    from paravg.io import save_torch_atomic
    from paravg.nnet.model_file import model_to_file_dict

    paths, stats = [], []
    for j, (model, objf) in enumerate(zip(models, objfs, strict=True)):
        p, s = directory / f"job{j}.pt", directory / f"job{j}.json"
        save_torch_atomic(p, model_to_file_dict(model))
        s.write_text(json.dumps({"objf": objf}))
        paths.append(p)
        stats.append(s)
    return paths, stats
