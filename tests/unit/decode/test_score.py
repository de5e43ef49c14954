"""Scoring as local/score.sh: WER by hand, setting choice, details, missing text, OOVs."""

import json

import pytest
from lattice_synth import U1, U2, score

from paravg.decode.score import (
    best_setting,
    collapse,
    normalise_hyp,
    per_utt_lines,
    score_setting,
)


def test_wer_counts_by_hand():
    refs = {"a": ["THE", "CAT", "SAT"], "b": ["ON", "THE", "MAT"]}
    hyps = {"a": ["THE", "BAT", "SAT", "DOWN"], "b": ["THE", "MAT"]}
    s = score_setting(refs, hyps)
    # a: 1 substitution (CAT->BAT), 1 insertion (DOWN); b: 1 deletion (ON)
    assert (s["substitutions"], s["insertions"], s["deletions"]) == (1, 1, 1)
    assert s["errors"] == 3 and s["ref_tokens"] == 6
    assert s["rate"] == pytest.approx(50.0)


def test_missing_hypothesis_counts_as_deletions():
    s = score_setting({"a": ["X", "Y"]}, {})
    assert s["deletions"] == 2 and s["rate"] == 100.0


def test_best_setting_breaks_ties_towards_lower_weights():
    scores = {
        "12_0": {"errors": 3},
        "10_0.5": {"errors": 3},
        "10_0": {"errors": 3},
        "9_1": {"errors": 4},
    }
    assert best_setting(scores) == "10_0"


def test_normalisation_and_phone_collapse():
    assert normalise_hyp(["<UNK>", "CAT", "<NOISE>"]) == ["CAT"]
    assert collapse(["a", "a", "b", "a"]) == ["a", "b", "a"]


def test_per_utt_lines_kaldi_format():
    text = per_utt_lines({"u": ["A", "B"]}, {"u": ["A", "C", "D"]})
    lines = text.splitlines()
    assert lines[0].split() == ["u", "ref", "A", "B", "<eps>"]
    assert lines[1].split() == ["u", "hyp", "A", "C", "D"]
    assert lines[2].split() == ["u", "op", "C", "S", "I"]
    assert lines[3] == "u #csid 1 1 1 0"


def test_score_set_applies_the_grid_to_the_lattices_and_reports_oovs(tmp_path):
    (tmp_path / "text").write_text("u1 A B\nu2 A ZED\n")
    res = score(tmp_path, [{"u1": U1}, {"u2": U2}])
    hyps = json.loads((tmp_path / "hyps.json").read_text())["words"]
    assert hyps == {"1_0": {"u1": "A", "u2": "A"}, "2_0": {"u1": "A B", "u2": "A"}}
    assert res["wer_setting"] == "2_0" and res["lmwt"] == 2.0
    assert res["wer"] == pytest.approx(25.0)  # ZED deleted: 1 error of 4 words
    assert res["wer_all"] == {"1_0": pytest.approx(50.0), "2_0": pytest.approx(25.0)}
    assert res["oov"]["count"] == 1 and res["oov"]["first_utterance"] == {"ZED": "u2"}
    assert "u2 #csid 1 0 0 1" in (tmp_path / "wer_details" / "per_utt").read_text()
    assert res["timing"]["frames"] == 20
    # the CTM of the chosen setting (get_ctm_conf.sh): u1's A averaged over its two
    # alignments (frames 0-3 and 0-5, posteriors 0.525 / 0.475) shares the overlap with
    # B (3-5) in proportion, ending at frame 3.32; u2's one word
    ctm = (tmp_path / "ctm").read_text().splitlines()
    assert [line.split()[:5] for line in ctm] == [
        ["u1", "1", "0.00", "0.03", "A"],
        ["u1", "1", "0.03", "0.02", "B"],
        ["u2", "1", "0.00", "0.04", "A"],
    ]
    assert res["ctm"] == {
        "setting": "2_0",
        "words": 3,
        "not_word_aligned": 0,
        "beam": 5.0,
        "decode_mbr": True,
    }


def test_a_set_with_segments_gets_its_ctm_in_recording_time(tmp_path):
    (tmp_path / "text").write_text("u1 A B\nu2 A\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "segments").write_text("u1 rec 1.00 1.10\nu2 rec 0.20 0.30\n")
    score(tmp_path, [{"u1": U1}, {"u2": U2}], data_dir=data)
    ctm = [line.split()[:5] for line in (tmp_path / "ctm").read_text().splitlines()]
    assert ctm == [
        ["rec", "1", "0.20", "0.04", "A"],
        ["rec", "1", "1.00", "0.03", "A"],
        ["rec", "1", "1.03", "0.02", "B"],
    ]


def test_tuned_setting_is_applied(tmp_path):
    (tmp_path / "text").write_text("u1 A B\n")
    (tmp_path / "dev.json").write_text(json.dumps({"wer_setting": "1_0"}))
    res = score(tmp_path, [{"u1": U1}], tuned_json=tmp_path / "dev.json")
    assert res["wer_setting"] == "1_0" and res["wer"] == pytest.approx(50.0)
    # the set's own best, score.sh's best_wer, beside the tuned figure
    assert res["wer_own_setting"] == "2_0" and res["wer_own"] == pytest.approx(0.0)
    assert (tmp_path / "ctm").read_text().split()[4] == "A"


def test_set_without_text_is_decoded_but_not_scored(tmp_path):
    res = score(tmp_path, [{"u1": U1}], text="no_text", lmwts=(10,))
    assert res["wer"] is None and "no text" in res["wer_note"]
    assert (tmp_path / "wer_details" / "per_utt").read_text() == ""
    assert res["ctm"]["setting"] == "10_0"  # the plain decode's best path


def test_messages_name_the_users_text_not_the_prepared_copy(tmp_path):
    """B8: decode and score messages named results/data/<set>/text."""
    from pathlib import Path

    from paravg.decode.score import user_file

    prepared = tmp_path / "results" / "data" / "test"
    prepared.mkdir(parents=True)
    assert user_file(prepared / "text") == prepared / "text"  # no report: what it has
    (prepared / "report.json").write_text(json.dumps({"source": "/corpus/data/test"}))
    assert user_file(prepared / "text") == Path("/corpus/data/test/text")


def test_splits_decoded_with_two_configs_are_refused(tmp_path):
    """B1: one set's splits must share their search options; scores.json records them."""
    from paravg.decode.score import splits_decode_options
    from paravg.errors import ConfigError

    opts = {"acoustic_scale": 0.1, "beam": 15.0, "lattice_beam": 8.0}
    paths = []
    for j, beam in enumerate((15.0, 15.0)):
        paths.append(tmp_path / f"split{j}.json")
        paths[-1].write_text(json.dumps({"options": {**opts, "beam": beam}}))
    assert splits_decode_options(paths) == opts
    paths[1].write_text(json.dumps({"options": {**opts, "beam": 14.0}}))
    with pytest.raises(ConfigError, match=r"decoded with different options:\n  .*split0\.json"):
        splits_decode_options(paths)


def test_the_splits_determinisation_seconds_are_summed_once_each(tmp_path):
    """merge_timing added a split's determinize_seconds twice from the second split on."""
    from paravg.decode.score import merge_timing

    paths = []
    for j, det in enumerate((1.5, 2.25, 4.0)):
        path = tmp_path / f"split{j}.json"
        path.write_text(json.dumps({"frames": 10, "nnet_seconds": 1.0, "search_seconds": 8.0,
                                    "determinize_seconds": det}))  # fmt: skip
        paths.append(path)
    timing = merge_timing(paths)
    assert timing == {"frames": 30, "nnet_seconds": 3.0, "search_seconds": 24.0,
                      "determinize_seconds": 7.75}  # fmt: skip
