"""Optimisation: Kaldi's online natural gradient (``paravg.optim.ngsgd``); the layer that
uses it is :mod:`paravg.nnet.ng_affine`."""

from paravg.optim.ngsgd import NgsgdOptions, OnlineNaturalGradient

__all__ = ["NgsgdOptions", "OnlineNaturalGradient"]
