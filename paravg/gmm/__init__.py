"""GMM-HMM front end in Python (Kaldi's ``src/tree`` + ``src/bin`` tree tools), torch-free.

Modules, lowest first: :mod:`clusterable` (Gaussian sufficient statistics and their
objective, clusterable-classes.cc), :mod:`event_map` (Kaldi's decision-tree EventMaps,
event-map.cc), :mod:`tree_io` (the binary ``ContextDependency`` format, context-dep.cc),
:mod:`tree_stats` (acc-tree-stats), :mod:`cluster` (k-means, top-down and bottom-up
clustering, cluster-utils.cc), :mod:`questions` (cluster-phones, compile-questions),
:mod:`build_tree` (build-tree: stub map, greedy splitting, leaf clustering).
"""
