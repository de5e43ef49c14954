"""Chain models (lattice-free MMI), Kaldi's ``src/chain/`` in pure PyTorch.

Modules, one job each: :mod:`topology` (``gen_topo.py``'s one-state chain topology),
:mod:`fst_arrays` (kaldifst FSTs <-> arc arrays), :mod:`phone_lm` (``language-model.cc``,
``chain-est-phone-lm``), :mod:`den_fst` (``CreateDenominatorFst``), :mod:`den_graph`
(``DenominatorGraph``: tensors, initial probabilities, ``GetNormalizationFst``),
:mod:`denominator` (``chain-denominator.cc``: leaky-HMM forward-backward),
:mod:`supervision` (``chain-supervision.cc`` from alignments), :mod:`numerator`
(``chain-numerator.cc``: log-space forward-backward), :mod:`objective`
(``ComputeChainObjfAndDeriv``, ``chain-training.cc``). ``python -m paravg.chain`` is the
command line (docs/chain.md).
"""
