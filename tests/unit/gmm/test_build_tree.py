"""build-tree on statistics where the best question is known; max-leaves; leaf clustering;
the stub map against Kaldi's own; round trip of the built tree through kaldi-hmm-gmm."""

from __future__ import annotations

import struct

import kaldi_hmm_gmm
import numpy as np
import pytest

from paravg.errors import DataError
from paravg.gmm.build_tree import (
    Roots,
    build_tree,
    cluster_event_map_restricted_by_map,
    find_best_split_for_key,
    get_stub_map,
    map_stats,
    read_roots,
)
from paravg.gmm.event_map import PDF_CLASS_KEY, ConstantEventMap, SplitEventMap
from paravg.gmm.questions import compile_questions
from paravg.gmm.tree_io import context_dependency_bytes, kaldi_context_dependency

from .synthetic import LEFT_CLASS, PHONES, left_class_stats

QUESTIONS = compile_questions([[1, 2], [3, 4], [1, 3], [2, 4], [1], [2], [3], [4]], 3, 1)
ROOTS = Roots(tuple((p,) for p in PHONES), (True,) * 4, (True,) * 4)
ONE_CLASS = dict.fromkeys(PHONES, 1)


def leaf_of(tree, left, central, right=1):
    return tree.map({0: left, 1: central, 2: right, PDF_CLASS_KEY: 0})


def test_stub_map_is_kaldis_get_stub_map_byte_for_byte():
    ctx = kaldi_hmm_gmm.monophone_context_dependency([1, 2, 3, 5], [0, 3, 3, 1, 0, 2])
    (signed,) = ctx.__getstate__()
    stub, next_leaf = get_stub_map(0, [[1], [2], [3], [5]], {1: 3, 2: 3, 3: 1, 5: 2}, [False] * 4)
    assert context_dependency_bytes(stub, 1, 0) == struct.pack(f"<{len(signed)}b", *signed)
    assert next_leaf == 9
    shared, n = get_stub_map(1, [[1, 2], [3], [4, 5, 6]], dict.fromkeys(range(1, 7), 3), [True] * 3)
    assert n == 3 and isinstance(shared, SplitEventMap) and shared.key == 1


def test_best_question_is_the_left_phones_class():
    stats = left_class_stats(dict.fromkeys(PHONES, 3.0))
    gain, yes_set = find_best_split_for_key(stats.subset(stats.events[:, 1] == 2), QUESTIONS, 0)
    assert yes_set == (1, 2) and gain > 1000
    right_gain, _ = find_best_split_for_key(stats.subset(stats.events[:, 1] == 2), QUESTIONS, 2)
    assert right_gain < 20  # the right phone carries no information


def test_tree_splits_every_phone_on_its_left_context_and_nothing_else():
    stats = left_class_stats(dict.fromkeys(PHONES, 3.0))
    built = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=100.0, cluster_thresh=0)
    assert built.num_leaves == 8 and built.num_removed == 0
    assert sorted(set(built.tree.leaves())) == list(range(8))
    for central in PHONES:
        in_class = {
            leaf_of(built.tree, left, central, right) for left in LEFT_CLASS for right in PHONES
        }
        out_class = {
            leaf_of(built.tree, left, central, right) for left in (3, 4) for right in PHONES
        }
        assert len(in_class) == 1 and len(out_class) == 1 and in_class != out_class
    # each leaf's frames have the mean the generator gave them
    leaves = map_stats(stats, built.tree)
    for leaf in range(8):
        rows = leaves == leaf
        mean = stats.x_stats[rows].sum(0) / stats.count[rows].sum()
        central = set(stats.events[rows, 1].tolist()).pop()
        shifted = set(np.isin(stats.events[rows, 0], LEFT_CLASS).tolist()).pop()
        np.testing.assert_allclose(mean, 10 * central + 3.0 * shifted, atol=0.25)
    assert built.split_gain > 4 * 1000


def test_max_leaves_keeps_the_largest_gains():
    stats = left_class_stats({1: 1.0, 2: 4.0, 3: 2.0, 4: 8.0})
    built = build_tree(
        stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=10.0, max_leaves=6, cluster_thresh=0
    )
    assert built.num_leaves == 6
    split = {c for c in PHONES if leaf_of(built.tree, 1, c) != leaf_of(built.tree, 3, c)}
    assert split == {2, 4}  # the two phones whose left context matters most


def test_clustering_merges_only_splits_cheaper_than_the_threshold():
    stats = left_class_stats({1: 0.5, 2: 4.0, 3: 4.0, 4: 4.0})
    split_only = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=50.0, cluster_thresh=0)
    assert split_only.num_leaves == 8
    phone1 = stats.subset(stats.events[:, 1] == 1)
    gain1, _ = find_best_split_for_key(phone1, QUESTIONS, 0)
    clustered = build_tree(
        stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=50.0, cluster_thresh=2 * gain1
    )
    assert clustered.num_leaves == 7 and clustered.num_removed == 1
    assert leaf_of(clustered.tree, 1, 1) == leaf_of(clustered.tree, 3, 1)  # phone 1 merged back
    assert leaf_of(clustered.tree, 1, 2) != leaf_of(clustered.tree, 3, 2)
    assert split_only.objf - clustered.objf == pytest.approx(gain1, rel=1e-6)


def test_clustering_is_restricted_to_each_root():
    stats = left_class_stats(dict.fromkeys(PHONES, 0.0))  # every leaf alike, but one per phone
    stub, _ = get_stub_map(1, [(p,) for p in PHONES], ONE_CLASS, [True] * 4)
    tree, removed = cluster_event_map_restricted_by_map(stub, stats, 1.0e9, stub)
    assert removed == 0 and tree == stub
    two_leaves = SplitEventMap(0, (1, 2), ConstantEventMap(0), ConstantEventMap(1))
    merged, removed = cluster_event_map_restricted_by_map(
        two_leaves, stats, 1.0e9, ConstantEventMap(0)
    )
    assert removed == 1 and set(merged.leaves()) == {0}  # Kaldi keeps the first id


def test_default_cluster_thresh_is_the_smallest_split():
    stats = left_class_stats({1: 1.0, 2: 4.0, 3: 4.0, 4: 4.0})
    built = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=50.0)
    gain1, _ = find_best_split_for_key(stats.subset(stats.events[:, 1] == 1), QUESTIONS, 0)
    assert built.cluster_thresh == pytest.approx(gain1, rel=1e-9)


def test_not_split_roots_stay_one_leaf_and_shared_roots_pool_pdf_classes(tmp_path):
    (tmp_path / "roots.txt").write_text(
        "shared split 1\nnot-shared not-split 2\nshared split 3 4\n"
    )
    roots = read_roots(tmp_path / "roots.txt")
    assert roots.phone_sets == ((1,), (2,), (3, 4)) and roots.shared == (True, False, True)
    stats = left_class_stats(dict.fromkeys(PHONES, 3.0))
    built = build_tree(
        stats, QUESTIONS, roots, dict.fromkeys(PHONES, 2), thresh=100.0, cluster_thresh=0
    )
    assert {leaf_of(built.tree, left, 2) for left in PHONES} == {leaf_of(built.tree, 1, 2)}
    assert built.tree.map({0: 1, 1: 2, 2: 1, PDF_CLASS_KEY: 1}) != leaf_of(built.tree, 1, 2)
    (tmp_path / "bad.txt").write_text("shared maybe 1\n")
    with pytest.raises(DataError, match=r"bad\.txt, line 1"):
        read_roots(tmp_path / "bad.txt")


def test_built_tree_loads_in_kaldi_and_maps_every_seen_context_to_our_leaf():
    stats = left_class_stats({1: 1.0, 2: 4.0, 3: 2.0, 4: 8.0})
    built = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, thresh=10.0, max_leaves=7)
    ctx = kaldi_context_dependency(context_dependency_bytes(built.tree, 3, 1))
    assert ctx.num_pdfs == built.num_leaves
    leaves = map_stats(stats, built.tree)
    for i in range(len(stats)):
        left, central, right, pdf_class = stats.events[i].tolist()
        assert ctx.compute([left, central, right], pdf_class) == (True, leaves[i])


def test_round_num_leaves_merges_the_cheapest_leaves_down_to_a_multiple_of_8():
    stats = left_class_stats(dict.fromkeys(PHONES, 3.0))
    kwargs = dict(thresh=1.0e-3, max_leaves=11, cluster_thresh=0)
    unrounded = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, round_num_leaves=False, **kwargs)
    assert unrounded.num_leaves == 11  # 8 real splits' leaves, 3 splitting noise
    rounded = build_tree(stats, QUESTIONS, ROOTS, ONE_CLASS, **kwargs)
    assert rounded.num_leaves == 8 and rounded.num_removed == 3
    for central in PHONES:  # the noise went, the left-context splits stayed
        assert leaf_of(rounded.tree, 1, central) != leaf_of(rounded.tree, 3, central)
        assert (
            len({leaf_of(rounded.tree, left, central, r) for left in PHONES for r in PHONES}) == 2
        )
    assert unrounded.objf - rounded.objf < 0.01 * rounded.split_gain
