"""Optimisation: Kaldi's online natural gradient (``paravg.optim.ngsgd``, torch) and its
options (``paravg.optim.options``, torch-free: the config checks them at start-up); the
layer that uses it is :mod:`paravg.nnet.ng_affine`."""
