"""EM of a GMM-HMM: our gmm-acc-stats-ali + gmm-est against kaldi-hmm-gmm's own
(``AccumAmDiagGmm.accumulate_for_gmm`` + ``mle_am_diag_gmm_update``), an update by hand,
accumulators split over jobs, the transition update, mixup and gmm-init-model."""

from __future__ import annotations

import kaldi_hmm_gmm
import numpy as np
import pytest

from paravg.gmm.accumulate import EstOptions, GmmAccs, accumulate, estimate, sum_accs
from paravg.gmm.alignment import TransitionTable
from paravg.gmm.model import (
    GmmModel,
    boost_silence,
    gen_topo,
    init_model,
    init_mono,
    make_diag_gmm,
    mixup,
    read_topo,
    split_targets,
)
from paravg.gmm.tree_stats import accumulate_tree_stats

SIL, PHONES = (1,), (2, 3, 4)


def small_model(rng, dim=3, mix=2) -> GmmModel:
    """A monophone model (silence 5 states, phones 3) whose pdfs have ``mix`` random
    Gaussians."""
    model = init_mono(
        gen_topo(PHONES, SIL), [[p] for p in (*SIL, *PHONES)], [rng.normal(size=(40, dim))]
    )
    pdfs = []
    for _ in range(model.num_pdfs):
        w = rng.uniform(0.5, 1.0, size=mix)
        pdfs.append(
            make_diag_gmm(
                w / w.sum(), rng.normal(size=(mix, dim)), rng.uniform(0.5, 2.0, (mix, dim))
            )
        )
    model.set_pdfs(pdfs)
    return model


def random_alignment(rng, table: TransitionTable, frames: int) -> np.ndarray:
    return rng.integers(1, len(table.pdf), size=frames).astype(np.int32)


def test_update_matches_kaldi_hmm_gmm():
    rng = np.random.default_rng(0)
    model = small_model(rng)
    table = TransitionTable.of(model.trans)
    feats = {
        "u1": rng.normal(size=(400, 3)).astype(np.float32),
        "u2": rng.normal(size=(300, 3)).astype(np.float32),
    }
    alis = {u: random_alignment(rng, table, len(x)) for u, x in feats.items()}

    ours = model.copy()
    accs = accumulate(ours, feats, alis, table.pdf)

    kaldi = model.copy()
    kacc = kaldi_hmm_gmm.AccumAmDiagGmm()
    kacc.init(kaldi.am, kaldi_hmm_gmm.str_to_gmm_flags("mvw"))
    like = 0.0
    for u, x in feats.items():
        for frame, tid in zip(x, alis[u], strict=True):
            like += kacc.accumulate_for_gmm(kaldi.am, frame, int(table.pdf[tid]), 1.0)
    assert accs.tot_like == pytest.approx(like, rel=1e-5)
    assert accs.frames == 700 and accs.occ.sum() == pytest.approx(700)
    np.testing.assert_allclose(
        accs.pdf_occs(), [kacc.get_acc(p).occupancy.sum() for p in range(model.num_pdfs)], rtol=1e-5
    )

    opts = EstOptions(min_gaussian_occupancy=3, update_flags="mvw")
    estimate(ours, accs, opts)
    gmm_opts = kaldi_hmm_gmm.MleDiagGmmOptions()
    gmm_opts.min_gaussian_occupancy = 3
    kaldi_hmm_gmm.mle_am_diag_gmm_update(
        config=gmm_opts,
        amdiag_gmm_acc=kacc,
        flags=kaldi_hmm_gmm.str_to_gmm_flags("mvw"),
        am_gmm=kaldi.am,
    )
    assert ours.num_gauss == kaldi.num_gauss
    for pdf in range(model.num_pdfs):
        for a, b in zip(ours.pdf_params(pdf), kaldi.pdf_params(pdf), strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5)


def test_update_by_hand_and_low_count_removal():
    rng = np.random.default_rng(1)
    model = small_model(rng, dim=2, mix=1)
    table = TransitionTable.of(model.trans)
    pdf = 7
    tids = np.flatnonzero(table.pdf == pdf)
    x = rng.normal(4.0, 3.0, size=(60, 2))
    accs = accumulate(model, {"u": x}, {"u": np.full(60, tids[0], np.int32)}, table.pdf)
    estimate(model, accs, EstOptions(update_flags="mvw"))
    w, mean, var = model.pdf_params(pdf)
    np.testing.assert_allclose(w, [1.0])
    np.testing.assert_allclose(mean[0], x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(var[0], x.var(0), rtol=1e-4)
    # pdfs without data keep their parameters
    untouched = small_model(np.random.default_rng(1), dim=2, mix=1)
    np.testing.assert_allclose(model.pdf_params(0)[1], untouched.pdf_params(0)[1], rtol=1e-6)

    # a 2-Gaussian pdf whose second component gets (almost) no data loses it
    two = small_model(np.random.default_rng(2), dim=2, mix=2)
    pdfs = [two.am.get_pdf(p) for p in range(two.num_pdfs)]
    pdfs[pdf] = make_diag_gmm([0.5, 0.5], [[0.0, 0.0], [100.0, 100.0]], np.ones((2, 2)))
    two.set_pdfs(pdfs)
    accs = accumulate(
        two, {"u": rng.normal(size=(50, 2))}, {"u": np.full(50, tids[0], np.int32)}, table.pdf
    )
    estimate(two, accs, EstOptions(update_flags="mvw"))
    assert two.am.num_gauss_in_pdf(pdf) == 1


def test_jobs_sum_to_one_job_and_files_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    model = small_model(rng)
    table = TransitionTable.of(model.trans)
    feats = {f"u{i}": rng.normal(size=(80, 3)) for i in range(4)}
    alis = {u: random_alignment(rng, table, 80) for u in feats}
    whole = accumulate(model, feats, alis, table.pdf)
    for j, part in enumerate((["u0", "u1"], ["u2", "u3"])):
        accumulate(model, {u: feats[u] for u in part}, alis, table.pdf).save(tmp_path / f"{j}.acc")
    summed = sum_accs([GmmAccs.load(tmp_path / f"{j}.acc") for j in range(2)])
    np.testing.assert_allclose(summed.x, whole.x, rtol=1e-10)
    np.testing.assert_allclose(summed.trans_counts, whole.trans_counts)
    assert summed.frames == whole.frames and summed.tot_like == pytest.approx(whole.tot_like)
    other = small_model(rng, mix=3)
    with pytest.raises(ValueError, match="different models"):
        sum_accs([whole, accumulate(other, feats, alis, table.pdf)])


def test_transition_update_learns_self_loop_probabilities(tmp_path):
    rng = np.random.default_rng(4)
    model = small_model(rng, dim=2, mix=1)
    table = TransitionTable.of(model.trans)
    # phone 2, state 0: self-loop 9 times out of 10
    loop = next(
        t
        for t in range(1, len(table.pdf))
        if table.phone[t] == 2 and table.hmm_state[t] == 0 and table.is_self_loop[t]
    )
    forward = next(
        t
        for t in range(1, len(table.pdf))
        if table.phone[t] == 2 and table.hmm_state[t] == 0 and not table.is_self_loop[t]
    )
    ali = np.array([loop] * 90 + [forward] * 10, np.int32)
    estimate(model, accumulate(model, {"u": rng.normal(size=(100, 2))}, {"u": ali}, table.pdf))
    log_probs = np.asarray(model.trans.log_probs)
    assert np.exp(log_probs[loop]) == pytest.approx(0.9, abs=1e-4)
    assert np.exp(log_probs[forward]) == pytest.approx(0.1, abs=1e-4)
    # the learnt probabilities survive the model file
    model.save(tmp_path / "1.mdl")
    np.testing.assert_allclose(GmmModel.load(tmp_path / "1.mdl").trans.log_probs, log_probs)


def test_gen_topo_is_kaldis_gmm_topology():
    topo = read_topo(gen_topo([2, 3], [1]))
    assert [len(topo.topology_for_phone(p)) for p in (1, 2, 3)] == [6, 4, 4]  # + final state
    sil = topo.topology_for_phone(1)
    assert [t for t, _ in sil[0].transitions] == [0, 1, 2, 3]
    assert [t for t, _ in sil[2].transitions] == [1, 2, 3, 4]
    assert sil[4].transitions == [(4, 0.75), (5, 0.25)]
    assert topo.topology_for_phone(2)[1].transitions == [(1, 0.75), (2, 0.25)]


def test_mixup_allocates_as_kaldi_and_is_reproducible(tmp_path):
    rng = np.random.default_rng(5)
    model = small_model(rng, dim=2, mix=1)
    occs = rng.uniform(30.0, 3000.0, size=model.num_pdfs)
    occs[3] = 9000.0  # the busiest pdf gets the most Gaussians (occ^power)
    occs[5] = 50.0  # min-count 20: at most 2 Gaussians
    kaldi = model.copy()
    kaldi.am.split_by_count(state_occs=occs.astype(np.float32), target_components=60,
                            perturb_factor=0.01, power=0.25, min_count=20.0)  # fmt: skip
    ours = model.copy()
    mixup(ours, occs, 60, power=0.25, min_count=20.0, seed=1)
    per_pdf = [ours.am.num_gauss_in_pdf(p) for p in range(model.num_pdfs)]
    assert per_pdf == [kaldi.am.num_gauss_in_pdf(p) for p in range(model.num_pdfs)]
    assert sum(per_pdf) == 60 and per_pdf[3] == max(per_pdf) and per_pdf[5] == 2
    assert split_targets(occs, 60, 0.25, 20.0) == per_pdf
    # a split halves the weight and moves the two means apart by +-0.01 sigma * N(0, 1)
    w, m, _v = ours.pdf_params(5)
    w0, m0, v0 = model.pdf_params(5)
    np.testing.assert_allclose(w, [w0[0] / 2] * 2, rtol=1e-6)
    np.testing.assert_allclose(m.mean(0), m0[0], atol=1e-6)
    assert 0 < np.abs(m[0] - m0[0]).max() < 0.1 * np.sqrt(v0[0]).max()
    # the same seed gives the same model; another seed other perturbations
    again = model.copy()
    mixup(again, occs, 60, power=0.25, min_count=20.0, seed=1)
    other = model.copy()
    mixup(other, occs, 60, power=0.25, min_count=20.0, seed=2)
    np.testing.assert_array_equal(again.pdf_params(3)[1], ours.pdf_params(3)[1])
    assert not np.array_equal(other.pdf_params(3)[1], ours.pdf_params(3)[1])
    # the saved model keeps Gaussians, means and transition probabilities
    ours.save(tmp_path / "m.mdl")
    back = GmmModel.load(tmp_path / "m.mdl")
    assert back.num_gauss == 60 and back.trans.num_transition_ids == ours.trans.num_transition_ids
    for p in (0, 3):
        for x, y in zip(back.pdf_params(p), ours.pdf_params(p), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-6)


def test_boost_silence_scales_only_silence_weights():
    model = small_model(np.random.default_rng(6))
    boosted = boost_silence(model, list(SIL), 1.25)
    table = TransitionTable.of(model.trans)
    sil_pdfs = set(table.pdf[table.phone == SIL[0]])
    for p in range(model.num_pdfs):
        ratio = boosted.pdf_params(p)[0] / model.pdf_params(p)[0]
        np.testing.assert_allclose(ratio, 1.25 if p in sil_pdfs else 1.0, rtol=1e-6)


def test_init_mono_global_mean_and_init_model_per_leaf():
    rng = np.random.default_rng(7)
    x = rng.normal(2.0, 3.0, size=(500, 2))
    model = init_mono(gen_topo(PHONES, SIL), [[1], [2], [3], [4]], [x[:200], x[200:]])
    assert model.num_pdfs == 5 + 3 * 3 and model.num_gauss == model.num_pdfs
    _w, mean, var = model.pdf_params(4)
    np.testing.assert_allclose(mean[0], x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(var[0], x.var(0), rtol=1e-4)
    # gmm-init-model: a one-leaf-per-phone tree over tree stats; leaf = the phone's data
    from paravg.gmm.build_tree import get_stub_map, map_stats

    contexts = np.stack([rng.choice([2, 3, 4], 300)] * 3, axis=1)
    feats = contexts[:, 1:2] * 10.0 + rng.normal(size=(300, 2))
    stats = accumulate_tree_stats(contexts, np.zeros(300, int), feats, 1)
    stub, _ = get_stub_map(
        1, [[1], [2], [3], [4]], {1: 5, 2: 3, 3: 3, 4: 3}, [True, True, True, True]
    )
    leaves = map_stats(stats, stub)
    tri, occs = init_model(gen_topo(PHONES, SIL), (stub, 3, 1), stats, leaves)
    assert tri.num_pdfs == 4 and occs.sum() == 300
    for phone in (2, 3, 4):
        leaf = int(leaves[np.flatnonzero(stats.events[:, 1] == phone)[0]])
        mean = tri.pdf_params(leaf)[1][0]
        np.testing.assert_allclose(mean, feats[contexts[:, 1] == phone].mean(0), rtol=1e-6)


def _job_files(tmp_path, rng, table, lengths, order=None):
    """A job's feats.scp and ali.1.ark (utterances ``u0..``, sorted unless ``order``)."""
    from paravg.gmm.alignment import write_alignments
    from paravg.kaldi_io import write_ark_scp

    feats = {f"u{i}": rng.normal(size=(n, 3)).astype(np.float32) for i, n in enumerate(lengths)}
    alis = {u: random_alignment(rng, table, len(x)) for u, x in feats.items()}
    write_ark_scp(sorted(feats.items()), tmp_path / "feats.ark", tmp_path / "feats.scp")
    keys = order or sorted(alis)
    write_alignments(tmp_path / "ali.1.ark", {u: alis[u] for u in keys})
    return feats, alis


def test_frame_chunks_gather_whole_utterances_up_to_the_limit():
    from paravg.gmm.accumulate import frame_chunks

    utts = [(f"u{i}", np.zeros((n, 1)), None) for i, n in enumerate((40, 50, 30, 120, 10))]
    chunks = [[u for u, _x, _a in c] for c in frame_chunks(utts, 100)]
    # 40 + 50 fit; 30 + 120 do not; 120 alone (longer than the limit); then 10
    assert chunks == [["u0", "u1"], ["u2"], ["u3"], ["u4"]]


def test_the_streamed_job_accumulates_per_chunk_as_one_pass(tmp_path, monkeypatch):
    """stages.acc (gmm_acc) reads feats.scp and ali.JOB one utterance at a time; in
    chunks of 100 frames its statistics are one pass's up to the order of the sums (the
    counts and frames exactly); in one chunk (every job smaller than CHUNK_FRAMES, as the
    demo's) bit for bit."""
    from paravg.gmm import accumulate as acc_module
    from paravg.gmm.stages import acc

    rng = np.random.default_rng(5)
    small_model(rng).save(tmp_path / "0.mdl")
    model = GmmModel.load(tmp_path / "0.mdl")  # the job's model, as the stage reads it
    table = TransitionTable.of(model.trans)
    feats, alis = _job_files(tmp_path, rng, table, [70, 45, 130, 20, 66, 90, 5])
    whole = accumulate(model, feats, alis, table.pdf)  # two mappings, one chunk
    assert whole.frames == 426

    acc(tmp_path / "0.mdl", tmp_path / "feats.scp", tmp_path / "ali.1.ark", tmp_path / "a.acc")
    same = GmmAccs.load(tmp_path / "a.acc")
    for name in ("occ", "x", "x2", "trans_counts", "num_gauss"):
        np.testing.assert_array_equal(getattr(same, name), getattr(whole, name), name)
    assert same.tot_like == whole.tot_like and same.frames == whole.frames

    chunks = []
    real = acc_module.frame_chunks
    monkeypatch.setattr(acc_module, "CHUNK_FRAMES", 100)
    monkeypatch.setattr(
        acc_module, "frame_chunks", lambda u, n: (chunks.append(c) or c for c in real(u, n))
    )
    acc(tmp_path / "0.mdl", tmp_path / "feats.scp", tmp_path / "ali.1.ark", tmp_path / "b.acc")
    chunked = GmmAccs.load(tmp_path / "b.acc")
    # utterances of 70, 45, 130, 20, 66, 90, 5 frames in chunks of at most 100
    assert [sum(len(x) for _u, x, _a in c) for c in chunks] == [70, 45, 130, 20 + 66, 90 + 5]
    np.testing.assert_array_equal(chunked.trans_counts, whole.trans_counts)
    assert chunked.frames == whole.frames
    for name in ("occ", "x", "x2"):
        got, want = getattr(chunked, name), getattr(whole, name)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    assert chunked.tot_like == pytest.approx(whole.tot_like, rel=1e-12)


def test_a_streamed_table_out_of_order_or_of_the_wrong_length_names_file_and_utterance(
    tmp_path,
):
    from paravg.errors import DataError
    from paravg.gmm.alignment import write_alignments
    from paravg.gmm.stages import acc

    rng = np.random.default_rng(6)
    model = small_model(rng)
    model.save(tmp_path / "0.mdl")
    table = TransitionTable.of(model.trans)
    _, alis = _job_files(tmp_path, rng, table, [30, 40, 50], order=["u0", "u2", "u1"])
    ali = tmp_path / "ali.1.ark"
    with pytest.raises(DataError, match=rf"{ali}: not sorted: 'u1' after 'u2'"):
        acc(tmp_path / "0.mdl", tmp_path / "feats.scp", ali, tmp_path / "a.acc")
    write_alignments(ali, {"u0": alis["u0"], "u1": alis["u1"][:-1], "u2": alis["u2"]})
    with pytest.raises(DataError, match=rf"{ali}: utterance u1: alignment of 39 frames, "
                       rf"features \({tmp_path / 'feats.scp'}\) of 40"):  # fmt: skip
        acc(tmp_path / "0.mdl", tmp_path / "feats.scp", ali, tmp_path / "a.acc")
    assert not (tmp_path / "a.acc").exists()
