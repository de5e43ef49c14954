"""GMM-HMM front end in Python (Kaldi's ``src/tree``, ``src/gmmbin`` and ``steps/train_*.sh``),
torch-free.

Tree building, lowest first: :mod:`clusterable` (Gaussian sufficient statistics and their
objective, clusterable-classes.cc), :mod:`event_map` (Kaldi's decision-tree EventMaps,
event-map.cc), :mod:`tree_io` (the binary ``ContextDependency`` format, context-dep.cc),
:mod:`tree_stats` (acc-tree-stats), :mod:`cluster` (k-means, top-down and bottom-up
clustering, cluster-utils.cc), :mod:`questions` (cluster-phones, compile-questions),
:mod:`build_tree` (build-tree: stub map, greedy splitting, leaf clustering).

Training: :mod:`deltas` (apply-cmvn, add-deltas), :mod:`data` (13-dim MFCCs, job splits,
dict and lang dirs), :mod:`model` (gmm-init-mono, gmm-init-model, gmm-mixup,
gmm-boost-silence, gen_topo.pl), :mod:`accumulate` (gmm-acc-stats-ali, gmm-sum-accs,
gmm-est), :mod:`alignment` (ali-to-pdf, ali-to-phones, convert-ali, acc-tree-stats from
alignments), :mod:`align` (compile-train-graphs, align-equal-compiled,
gmm-align-compiled), :mod:`train_mono` (train_mono.sh, align_si.sh), :mod:`train_deltas`
(train_deltas.sh); :mod:`cli_train` and ``__main__`` (``python -m paravg.gmm``).
"""
