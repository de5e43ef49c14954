"""The egs plan: archive counts, held-out utterances, job split, input checks."""

import numpy as np
import pytest
from egs_synth import default_lengths, make_data, plan_synth_egs, synth_egs_options

from paravg.egs import EgsInfo
from paravg.egs.plan import (
    choose_heldout,
    effective_subset_size,
    egs_per_archive_for,
    num_archives_for,
    read_uttlist,
    split_by_speaker,
)
from paravg.errors import DataError


def test_num_archives_formula_is_kaldis():
    # num_frames // (F * samples_per_iter) + 1
    assert num_archives_for(3_199_999, 8, 400_000) == 1
    assert num_archives_for(3_200_000, 8, 400_000) == 2
    assert num_archives_for(36_000_000, 8, 400_000) == 12
    assert num_archives_for(100, 8, 400_000) == 1
    assert egs_per_archive_for(36_000_000, 8, 12) == 375_000  # <= samples_per_iter
    assert egs_per_archive_for(3_200_000, 8, 2) == 200_000


def test_subset_size_is_kaldis_when_enough_data_and_reduced_otherwise():
    assert effective_subset_size(1201, 300) == 300  # Kaldi: more than 4 x 300
    assert effective_subset_size(1200, 300) == 299
    assert effective_subset_size(101, 300) == 25
    assert effective_subset_size(5, 300) == 1
    with pytest.raises(DataError, match="only 4 usable utterances"):
        effective_subset_size(4, 300)


def test_heldout_valid_is_expanded_over_utt2uniq_and_disjoint_from_train_subset():
    utts = [f"sp{k}-u{i}" for i in range(30) for k in (0, 1, 2)]
    uniq = {u: u.split("-")[1] for u in utts}
    valid, subset = choose_heldout(utts, 4, srand=0, utt2uniq=uniq)
    sources = {uniq[u] for u in valid}
    assert len(sources) == 4 and len(valid) == 12  # all 3 perturbed copies of 4 sources
    assert not set(valid) & set(subset) and len(subset) == 4
    assert choose_heldout(utts, 4, 0, uniq) == (valid, subset)
    assert choose_heldout(utts, 4, 1, uniq) != (valid, subset)


def test_split_by_speaker_keeps_speakers_together():
    utt2spk = {f"s{i % 5}-u{i}": f"s{i % 5}" for i in range(23)}
    jobs = split_by_speaker(utt2spk, utt2spk, 3)
    assert sorted(u for j in jobs for u in j) == sorted(utt2spk)
    spk_job = {}
    for j, job in enumerate(jobs):
        for u in job:
            assert spk_job.setdefault(utt2spk[u], j) == j
    assert all(jobs)


def plan(data, out, **opts):
    return plan_synth_egs(data, out, synth_egs_options(**opts))


def test_a_damaged_info_json_is_a_data_error(synth, tmp_path):
    info = plan(synth, tmp_path / "egs")
    path = tmp_path / "egs" / "info.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match=r"info\.json: not valid JSON"):
        EgsInfo.load(path)
    with pytest.raises(DataError, match=r"info\.json: unknown keys \['extra'\]"):
        EgsInfo.from_dict({**info.to_dict(), "extra": 1}, where=str(path))
    without = {k: v for k, v in info.to_dict().items() if k != "num_archives"}
    with pytest.raises(DataError, match=r"info\.json: not an egs info\.json"):
        EgsInfo.from_dict(without, where=str(path))


def test_plan_writes_lists_and_info(synth, tmp_path):
    info = plan(synth, tmp_path / "egs")
    assert EgsInfo.load(tmp_path / "egs" / "info.json") == info
    num_frames = sum(synth.lengths.values())
    assert info.num_frames == num_frames
    assert info.num_archives == num_frames // (8 * 50) + 1
    assert info.num_targets == 7 and info.feat_dim == 5 and info.ivector_dim == 0
    short = [u for u, T in synth.lengths.items() if T < 8]
    assert info.num_utts_too_short == len(short) > 0
    valid = dict(read_uttlist(tmp_path / "egs" / "lists" / "valid"))
    jobs = [dict(read_uttlist(tmp_path / "egs" / "lists" / f"job.{j}")) for j in range(2)]
    train = {u for j in jobs for u in j}
    assert len(valid) == 4 and not set(valid) & train
    assert train | set(valid) | set(short) == set(synth.lengths)
    assert all(synth.lengths[u] == T for j in jobs for u, T in j.items())


def test_small_data_reduces_subset_and_says_so(tmp_path):
    data = make_data(tmp_path / "d", {f"s-u{i}": 20 for i in range(9)})
    info = plan(data, tmp_path / "egs", num_utts_subset=300)
    assert info.num_utts_subset == 2 and info.num_utts_subset_requested == 300
    assert "reduced from 300 to 2" in info.notes[0]


def test_target_length_mismatch_names_utterance_before_writing(tmp_path):
    lengths = default_lengths(12)
    bad = sorted(lengths)[5]
    data = make_data(tmp_path / "d", lengths, target_delta={bad: -3})
    with pytest.raises(
        DataError,
        match=rf"utterance {bad}: {lengths[bad] - 3} targets but "
        rf"{lengths[bad]} feature frames",
    ):
        plan(data, tmp_path / "egs")
    assert not (tmp_path / "egs").exists()
    info = plan(make_data(tmp_path / "ok", lengths, target_delta={bad: -2}), tmp_path / "egs2")
    assert info.num_frames == sum(lengths.values())  # within tolerance: accepted


def test_ivector_rows_mismatch_names_utterance(tmp_path):
    lengths = {f"s-u{i}": 300 for i in range(8)}
    data = make_data(tmp_path / "d", lengths, ivectors=True, ivector_rows={"s-u3": 5})
    with pytest.raises(DataError, match=r"utterance s-u3: 5 i-vector rows"):
        plan(data, tmp_path / "egs")


def test_too_few_usable_utterances_is_a_clear_error(tmp_path):
    data = make_data(tmp_path / "d", {"s-a": 30, "s-b": 30, "s-c": 4, "s-d": 3, "s-e": 40})
    with pytest.raises(DataError, match="only 3 usable utterances"):
        plan(data, tmp_path / "egs")


def test_targets_beyond_num_targets_are_an_error(synth, tmp_path):
    with pytest.raises(DataError, match=r"target id 6 >= data.num_targets \(5\)"):
        plan(synth, tmp_path / "egs", num_targets=5)
    assert plan(synth, tmp_path / "egs", num_targets=10).num_targets == 10
    assert np.isfinite(plan(synth, tmp_path / "egs").egs_per_archive)
