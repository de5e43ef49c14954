"""Shrinkage of a job's start model: ``train_rnn.py`` / ``train_dnn.py``'s shrink step.

Kaldi's training scripts can scale every parameter of the model a job starts from
(``nnet3-am-copy --scale=s``, i.e. ``ScaleNnet``: each updatable component's parameters
× s; the fixed LDA and the stored statistics' ratios unchanged). The factor of an
iteration with per-job learning rate lr (``steps/nnet3/train_rnn.py``, the loop of
``train``; ``train_dnn.py`` has the first line only)::

    s = 1 − proportional_shrink · lr
    if shrink_value < s:
        s = shrink_value  if iteration == 0 or saturation > shrink_saturation_threshold
            else 1

The saturation of a model (``steps/nnet3/get_saturation.pl`` on ``nnet3-am-info``) is
the mean over its sigmoid and tanh nonlinearities of 1 − (mean derivative / the largest
derivative the function has): 0.25 for a sigmoid, 1 for a tanh. A
``LstmNonlinearityComponent`` has five (σ(i), σ(f), tanh(c_part), σ(o), tanh(c_t)); each
one's mean derivative is Σ_units deriv_sum / count / C, from the statistics the model
carries (those of the jobs it was synced from). Each family computes its own
(:meth:`paravg.nnet.acoustic.AcousticModel.saturation`; the TDNN-LSTM's over its
:class:`~paravg.nnet.lstm.LstmNonlinearity` components): a model with no such
nonlinearity, or none with statistics, has saturation 0 (the script prints 0.0), and
only iteration 0 shrinks then.

Kaldi's defaults: train_rnn.py shrink-value 0.99, shrink-saturation-threshold 0.40,
proportional-shrink 0 (train_dnn.py: proportional-shrink 0, no shrink-value). paravg's
``trainer.shrink_value`` has no default (absent: 1, no shrinkage; docs/models.md).
"""

from __future__ import annotations

import torch

from paravg.nnet.acoustic import AcousticModel


def shrinkage_value(
    iteration: int,
    learning_rate: float,
    model: AcousticModel,
    shrink_value: float = 1.0,
    saturation_threshold: float = 0.4,
    proportional_shrink: float = 0.0,
) -> tuple[float, float | None]:
    """(s of the module docstring, the saturation it was decided on, or None when the
    saturation was not needed)."""
    s = 1.0 - proportional_shrink * learning_rate
    if s <= 0.5:
        raise ValueError(
            f"proportional_shrink = {proportional_shrink} gives a shrink value of {s} at "
            f"learning rate {learning_rate} (Kaldi: must be above 0.5)"
        )
    if shrink_value < s:
        if iteration == 0:
            return shrink_value, None
        sat = model.saturation()
        return (shrink_value if sat > saturation_threshold else 1.0), sat
    return s, None


@torch.no_grad()
def scale_parameters(components, scale: float) -> None:
    """``ScaleNnet``: every updatable component's parameters × ``scale``."""
    if scale == 1.0:
        return
    for comp in components:
        for param in comp.update_params():
            param.mul_(scale)
