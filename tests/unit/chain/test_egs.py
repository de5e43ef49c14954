"""Chain egs supervision (paravg/chain/egs.py): Kaldi's SupervisionSplitter cuts an
utterance's supervision into exactly the pieces of its paths, and the flat table gives
the numerator the batched graph the FSTs give it."""

import numpy as np
import pytest
import torch

from paravg.chain.den_graph import normalization_fst
from paravg.chain.egs import (
    ChunkSupervisor,
    SupervisionTable,
    output_frames,
    supervision_range,
    targets_to_phones,
    utterance_supervision,
)
from paravg.chain.fst_arrays import fst_to_arrays
from paravg.chain.numerator import NumeratorGraph, state_times
from paravg.chain.supervision import SupervisionOptions

from .numerator_loss import numerator_logprob
from .test_numerator import paths

# 21 input frames, 7 output frames: phones 1, 2, 3, 1 (targets 0, 1, 2, 0)
TARGETS = [0] * 3 + [1] * 6 + [2] * 9 + [0] * 3
OPTS = SupervisionOptions(1, 1, 3)


def test_targets_are_chain_phones_one_up():
    assert targets_to_phones(TARGETS) == ([1, 2, 3, 1], [3, 6, 9, 3])
    assert output_frames(8, 3) == 3 and output_frames(9, 3) == 3


def test_a_frame_range_accepts_exactly_the_pieces_of_the_utterance_paths(chain_models):
    ctx_dep, tm = chain_models
    sup = utterance_supervision(TARGETS, ctx_dep, tm, OPTS)
    times = state_times(sup)
    full = {tuple(p) for p, _ in paths(sup, 7)}
    assert full
    for begin, n in [(0, 3), (2, 3), (4, 3), (1, 6), (0, 7)]:
        got = fst_to_arrays(supervision_range(sup, times, begin, n))
        assert {tuple(p) for p, _ in paths(got, n)} == {p[begin : begin + n] for p in full}
    assert supervision_range(sup, times, 5, 3) is None  # past the utterance's 7 frames


def test_chunk_supervisions_are_weighted_and_batch_like_the_fsts(chain_models, den_fst, tmp_path):
    ctx_dep, tm = chain_models
    norm = normalization_fst(den_fst)
    chunker = ChunkSupervisor(TARGETS, ctx_dep, tm, norm, OPTS)
    fsts = [chunker.chunk(s, 3) for s in (0, 3, 6, 4, 12, 15)]
    assert fsts[-1] is None  # output frames 5, 6, 7: past the end
    phase1 = fsts[
        3
    ]  # frame 4: the supervision of frames 1.. (phase 1, 20 frames: 7 outputs), its frames 1-3
    sup1 = utterance_supervision(TARGETS[1:], ctx_dep, tm, OPTS)
    assert {tuple(p) for p, _ in paths(phase1, 3)} == {tuple(p[1:4]) for p, _ in paths(sup1, 7)}
    for a in fsts[:-1]:
        assert all(lw < 0 for _, lw in paths(a, 3))  # the den graph's probabilities
    table = SupervisionTable.from_fsts(fsts, 3)
    assert table.has_supervision().tolist() == [True] * 5 + [False]
    rows = [4, 0, 2, 3]
    x = torch.randn(3, len(rows), 6, dtype=torch.float64, requires_grad=True)
    ref = NumeratorGraph.from_fsts([fsts[r] for r in rows], 3, 6)
    got = table.numerator_graph(rows, 6)
    lp_ref, lp = numerator_logprob(ref, x), numerator_logprob(got, x)
    torch.testing.assert_close(lp, lp_ref, rtol=1e-6, atol=1e-6)  # float32 storage
    (g_ref,) = torch.autograd.grad(lp_ref.sum(), x)
    (g,) = torch.autograd.grad(lp.sum(), x)
    torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-5)
    # a shuffle (select) and the memory-mapped files keep every row
    shuffled = table.select([5, 3, 1])
    shuffled.save(tmp_path / "egs.1")
    loaded = SupervisionTable.load(tmp_path / "egs.1")
    assert loaded.has_supervision().tolist() == [False, True, True]
    lp2 = numerator_logprob(loaded.numerator_graph([2, 1], 6), x[:, :2].detach())
    lp3 = numerator_logprob(table.numerator_graph([1, 3], 6), x[:, :2].detach())
    torch.testing.assert_close(lp2, lp3)
    with pytest.raises(ValueError, match="one length"):
        table.numerator_graph([5], 6)


def test_prepare_chain_and_the_supervision_of_an_archive(tmp_path):
    """The run's chain setup from frame targets (4 phones: 8 pdfs), then every eg of an
    archive (keys ``<utt>-<first>``) gets the supervision of its output frames; an eg
    past its utterance's end an empty row; a minibatch's numerator is finite."""
    from paravg.chain.prepare import archive_supervision, load_chain, prepare_chain

    rng = np.random.default_rng(0)
    targets = {}
    for u in range(6):
        runs = rng.integers(0, 4, size=12)
        lens = rng.integers(3, 9, size=12)
        targets[f"utt-{u}"] = np.repeat(runs, lens)
    info = prepare_chain(targets.values(), 4, tmp_path / "chain")
    assert info["num_pdfs"] == 8 and info["num_phones"] == 4
    setup = load_chain(tmp_path / "chain")
    keys = ["utt-3-9", "utt-0-0", "utt-1-30", f"utt-2-{len(targets['utt-2']) - 5}"]
    table = archive_supervision(keys, [12] * 4, targets, setup, SupervisionOptions())
    assert table.has_supervision().tolist() == [True, True, True, False]
    assert table.frames.tolist() == [4, 4, 4, 0]
    graph = table.numerator_graph([0, 1, 2], setup.num_pdfs)
    logp = numerator_logprob(graph, torch.zeros(4, 3, 8, dtype=torch.float64))
    assert torch.isfinite(logp).all() and (logp < 0).all()
