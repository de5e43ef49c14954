"""Sync strategies: how the jobs of one iteration become the start models of the next.

``average`` (Kaldi, :mod:`paravg.sync.average`), ``bmuf`` (:mod:`paravg.sync.bmuf`),
ADPSGD's ``ring``, ``random-ring`` and ``delay-by-one`` (:mod:`paravg.sync.adpsgd`; the
rings and their mixings: :mod:`paravg.sync.ring`), ``gossip-average`` /
``random-gossip-average`` and ``d-psgd`` (:mod:`paravg.sync.decentralized`,
:mod:`paravg.sync.delay_by_one`), the EMA final model beside any of them
(:mod:`paravg.sync.ema`) and the consensus model of the decentralized methods
(:mod:`paravg.sync.consensus`). :mod:`paravg.sync.registry` is the one table of methods
the DAG reads: fan-in node, train-job edges, synced model, learning-rate factor;
:mod:`paravg.sync.nodes` the table of the node kinds a method names, and their runner.
"""
