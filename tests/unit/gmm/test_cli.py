"""``python -m paravg.gmm``: the tree tools a user runs on a lang dir and per-job statistics
(sum-tree-stats, build-tree, tree-info), in a fresh interpreter, and their errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from paravg.gmm.tree_io import load_kaldi_tree, read_tree
from tests.unit.gmm.synthetic import TRI_PHONES, TRI_SIL, TRI_TOPO, triphone_job_stats


def gmm_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "paravg.gmm", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def lang(tmp_path):
    """A lang dir of silence 1 and phones 2-7 (one set each, silence's root shared), with
    the extra question that tells the 'vowels' 2-4 apart."""
    lang = tmp_path / "lang"
    (lang / "phones").mkdir(parents=True)
    (lang / "topo").write_text(TRI_TOPO)
    (lang / "phones/sets.int").write_text("".join(f"{p}\n" for p in (TRI_SIL, *TRI_PHONES)))
    roots = f"shared split {TRI_SIL}\n" + "".join(f"not-shared split {p}\n" for p in TRI_PHONES)
    (lang / "phones/roots.int").write_text(roots)
    (lang / "phones/extra_questions.int").write_text("1\n2 3 4 5 6 7\n2 3 4\n")
    return lang


def test_build_tree_from_two_jobs_stats_gives_a_tree_kaldi_loads(tmp_path, lang):
    rng = np.random.default_rng(0)
    for j in (1, 2):
        triphone_job_stats(rng).save(tmp_path / f"{j}.treeacc.npz")
    summed = gmm_cli("sum-tree-stats", "all.npz", "1.treeacc.npz", "2.treeacc.npz", cwd=tmp_path)
    assert summed.returncode == 0, summed.stderr
    built = gmm_cli("build-tree", "--max-leaves", 40, lang, "all.npz", "tree", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    leaves = int(built.stdout.split("build-tree: ")[1].split()[0])
    # the stub has 18 phone leaves + silence's; the vowel question splits more, rounded to 8s
    assert 19 <= leaves <= 40 and leaves % 8 == 0
    _, width, central = read_tree(tmp_path / "tree")
    assert (width, central) == (3, 1)
    info = gmm_cli("tree-info", "tree", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert info.stdout.split() == ["num-pdfs", str(leaves), "context-width", "3",
                                   "central-position", "1"]  # fmt: skip
    # a vowel on the left changes phone 6's pdf, a non-vowel does not
    ctx = load_kaldi_tree(tmp_path / "tree")
    assert ctx.compute([2, 6, 7], 1) != ctx.compute([6, 6, 7], 1)
    assert ctx.compute([5, 6, 7], 1) == ctx.compute([6, 6, 7], 1)


def test_build_tree_names_what_is_missing(tmp_path, lang):
    (lang / "phones/roots.int").unlink()
    triphone_job_stats(np.random.default_rng(1), utterances=5).save(tmp_path / "s.npz")
    run = gmm_cli("build-tree", lang, "s.npz", "tree", cwd=tmp_path)
    assert run.returncode == 1
    assert f"{lang}: not a lang dir for build-tree, missing phones/roots.int" in run.stderr
    assert not (tmp_path / "tree").exists()
    run = gmm_cli("build-tree", lang.parent / "nowhere", "s.npz", "tree", cwd=tmp_path)
    assert "missing phones/sets.int, phones/roots.int, topo" in run.stderr


def test_unreadable_stats_and_tree_files_are_named(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not numpy")
    run = gmm_cli("sum-tree-stats", "out.npz", "bad.npz", cwd=tmp_path)
    assert run.returncode == 1 and "bad.npz: not tree statistics written by paravg" in run.stderr
    run = gmm_cli("sum-tree-stats", "out.npz", "absent.npz", cwd=tmp_path)
    assert run.returncode == 1 and "absent.npz: no such tree statistics file" in run.stderr
    (tmp_path / "tree").write_bytes(b"text")
    run = gmm_cli("tree-info", "tree", cwd=tmp_path)
    assert run.returncode == 1 and "tree: not a tree kaldi-hmm-gmm loads" in run.stderr
