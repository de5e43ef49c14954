"""The acoustic model: a TDNN with a fixed LDA-like input transform (Kaldi nnet3 xconfig)."""
