"""Decoding graphs (Kaldi's utils/prepare_lang.sh + utils/mkgraph.sh in Python).

Modules: :mod:`lexicon` (the demo lexicon), :mod:`lang` (lang dir, L), :mod:`topology`
(monophone topology, tree, transition model), :mod:`arpa` (Witten-Bell bigram),
:mod:`grammar` (ARPA -> G.fst in its own process), :mod:`hclg` (HCLG),
:mod:`build` (the demo's word and phone graphs), :mod:`load` (a graph dir for decoding).
"""
