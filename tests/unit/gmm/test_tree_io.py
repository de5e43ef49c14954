"""Kaldi binary tree format: byte-identical to Kaldi's own writer, loads in kaldi-hmm-gmm."""

from __future__ import annotations

import struct

import kaldi_hmm_gmm

from paravg.gmm.event_map import (
    PDF_CLASS_KEY,
    ConstantEventMap,
    SplitEventMap,
    table_from_dict,
)
from paravg.gmm.tree_io import (
    context_dependency_bytes,
    kaldi_context_dependency,
    read_context_dependency,
    read_tree,
    write_tree,
)


def kaldi_state_bytes(ctx) -> bytes:
    (signed,) = ctx.__getstate__()
    return struct.pack(f"<{len(signed)}b", *signed)


def test_reads_and_rewrites_kaldis_own_tree_byte_for_byte():
    ctx = kaldi_hmm_gmm.monophone_context_dependency([1, 2, 3], [0, 3, 3, 3])
    data = kaldi_state_bytes(ctx)
    tree, width, central = read_context_dependency(data)
    assert (width, central) == (1, 0)
    assert tree.map({0: 2, PDF_CLASS_KEY: 1}) == 4
    assert tree.map({0: 0, PDF_CLASS_KEY: 1}) is None  # a NULL table entry
    assert context_dependency_bytes(tree, width, central) == data


def test_split_tree_loads_in_kaldi_and_maps_as_ours(tmp_path):
    tree = SplitEventMap(
        0,
        (1, 3),
        ConstantEventMap(0),
        table_from_dict(PDF_CLASS_KEY, {0: ConstantEventMap(1), 2: ConstantEventMap(2)}),
    )
    ctx = kaldi_context_dependency(context_dependency_bytes(tree, 3, 1))
    assert (ctx.num_pdfs, ctx.context_width, ctx.central_position) == (3, 3, 1)
    for window in ([1, 2, 3], [2, 2, 3], [3, 5, 0], [0, 4, 4]):
        for pdf_class in (0, 1, 2):
            ours = tree.map({0: window[0], 1: window[1], 2: window[2], PDF_CLASS_KEY: pdf_class})
            ok, pdf = ctx.compute(window, pdf_class)
            assert (ok, pdf) == ((True, ours) if ours is not None else (False, -1))
    write_tree(tmp_path / "tree", tree, 3, 1)
    assert (tmp_path / "tree").read_bytes()[:2] == b"\0B"
    assert read_tree(tmp_path / "tree") == (tree, 3, 1)
