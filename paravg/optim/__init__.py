"""Optimisation: Kaldi's natural-gradient SGD (``paravg.optim.ngsgd``)."""

from paravg.optim.ngsgd import (
    NaturalGradientAffine,
    NgsgdOptions,
    OnlineNaturalGradient,
    make_affine_factory,
)

__all__ = [
    "NaturalGradientAffine",
    "NgsgdOptions",
    "OnlineNaturalGradient",
    "make_affine_factory",
]
