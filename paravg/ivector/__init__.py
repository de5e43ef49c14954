"""Online i-vectors, as Kaldi's ``steps/online/nnet2`` recipe computes them.

Stages (each a module with one job; numpy float64 maths):

* :mod:`.cmvn`: online cepstral mean normalisation (``apply-cmvn-online``);
* :mod:`.pca`: splicing and the PCA transform (``splice-feats``, ``est-pca``);
* :mod:`.features`: the two feature streams the i-vector system reads;
* :mod:`.ubm`: the diagonal-covariance UBM and its EM (``gmm-global-*``);
* :mod:`.posteriors`: pruned Gaussian posteriors (``VectorToPosteriorEntry``);
* :mod:`.extractor`: the i-vector model and the posterior of w (``IvectorExtractor``);
* :mod:`.extractor_em`: extractor EM statistics and update (``IvectorExtractorStats``);
* :mod:`.online`: online extraction (``ivector-extract-online2``);
* :mod:`.data`: speakers, pseudo-speakers and job splits;
* :mod:`.stages`: one function per Snakemake rule.
"""
