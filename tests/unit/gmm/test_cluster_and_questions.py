"""k-means, top-down and bottom-up clustering of Gaussian stats; cluster-phones questions;
compile-questions."""

from __future__ import annotations

import numpy as np

from paravg.gmm.build_tree import find_best_split_for_key
from paravg.gmm.cluster import Points, cluster_bottom_up, kmeans, refine_clusters, tree_cluster
from paravg.gmm.event_map import PDF_CLASS_KEY
from paravg.gmm.questions import cluster_phones, compile_questions, read_int_sets
from paravg.gmm.tree_stats import accumulate_tree_stats

from .synthetic import left_class_stats


def points_with_means(means, frames: int = 200, seed: int = 0) -> Points:
    rng = np.random.default_rng(seed)
    count, xs, x2s = [], [], []
    for m in means:
        f = np.asarray(m, dtype=float) + rng.normal(size=(frames, 2))
        count.append(frames)
        xs.append(f.sum(0))
        x2s.append((f * f).sum(0))
    return Points(np.array(count, float), np.array(xs), np.array(x2s), 0.01)


def test_kmeans_and_refinement_find_the_two_groups():
    points = points_with_means([[0, 0], [10, 10], [0.2, 0], [10, 9.8], [0.1, 0.1], [9.9, 10]])
    gain, assignments = kmeans(points, 2, num_tries=3)
    assert assignments[0] == assignments[2] == assignments[4] != assignments[1]
    assert assignments[1] == assignments[3] == assignments[5]
    assert gain > 1000
    bad = np.array([0, 0, 0, 1, 1, 1])  # half right: refinement repairs it and gains
    assert refine_clusters(points, bad, 2) > 0
    assert bad[0] == bad[2] == bad[4] != bad[1] == bad[3] == bad[5]


def test_tree_cluster_numbers_leaves_then_nonleaves_root_last():
    points = points_with_means([[0, 0], [10, 10], [0, 3], [10, 14]])
    leaf_of, parents, num_leaves = tree_cluster(points, 4)
    assert num_leaves == 4 and len(parents) == 7
    assert sorted(set(leaf_of.tolist())) == [0, 1, 2, 3]
    assert parents[6] == 6  # the root is last and its own parent
    # points 0 and 2 (and 1 and 3) hang under one non-root node
    assert parents[leaf_of[0]] == parents[leaf_of[2]] != parents[leaf_of[1]] == parents[leaf_of[3]]
    assert parents[parents[leaf_of[0]]] == 6


def test_bottom_up_merges_while_loss_below_threshold():
    points = points_with_means([[0, 0], [0.05, 0], [10, 10], [10, 10.05]], frames=50)
    assignments, change = cluster_bottom_up(points, 50.0)
    assert assignments.tolist() == [0, 0, 1, 1] and -50.0 < change <= 0
    assignments, change = cluster_bottom_up(points, 0.0)
    assert assignments.tolist() == [0, 1, 2, 3] and change == 0.0


def test_cluster_phones_groups_phones_with_alike_statistics(tmp_path):
    rng = np.random.default_rng(0)
    phones = np.repeat(np.arange(1, 7), 300)
    group_mean = np.where(phones <= 3, 0.0, 8.0) + 0.3 * phones
    feats = group_mean[:, None] + rng.normal(size=(len(phones), 2))
    contexts = np.stack([np.zeros_like(phones), phones, np.zeros_like(phones)], axis=1)
    stats = accumulate_tree_stats(contexts, np.ones_like(phones), feats, central_position=1)
    questions = cluster_phones(stats, [[p] for p in range(1, 7)], pdf_class_list=[1])
    assert questions[0] in ([1, 2, 3], [4, 5, 6])  # the most general question comes first
    assert [1, 2, 3] in questions and [4, 5, 6] in questions
    assert all([p] in questions for p in range(1, 7))
    assert [1, 2, 3, 4, 5, 6] not in questions  # the root's set stays empty, as in Kaldi
    assert len(questions) == len({tuple(q) for q in questions})
    (tmp_path / "extra_questions.int").write_text("1 4\n2 5 6\n")
    assert read_int_sets(tmp_path / "extra_questions.int") == [[1, 4], [2, 5, 6]]


def test_compile_questions_asks_phones_everywhere_and_nested_pdf_classes():
    q = compile_questions([[3, 1], [1, 3], [2]], context_width=3, max_num_pdf_classes=3)
    assert q.by_key[0] == q.by_key[1] == q.by_key[2] == [(1, 3), (2,)]
    assert q.by_key[PDF_CLASS_KEY] == [(0,), (0, 1)]
    assert q.asked_keys() == [PDF_CLASS_KEY, 0, 1, 2]


def test_refined_question_beats_the_best_listed_one():
    stats = left_class_stats(dict.fromkeys((1, 2, 3, 4), 3.0))
    poor = compile_questions([[1], [2], [3], [4]], 3, 1, num_iters_refine=0)
    refined = compile_questions([[1], [2], [3], [4]], 3, 1, num_iters_refine=5)
    gain_poor, _ = find_best_split_for_key(stats, poor, 0)
    gain_refined, yes_set = find_best_split_for_key(stats, refined, 0)
    assert gain_refined > gain_poor and set(yes_set) in ({1, 2}, {0, 3, 4}, {3, 4})
