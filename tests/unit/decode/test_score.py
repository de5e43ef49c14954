"""Scoring as local/score.sh: WER by hand, setting choice, details, missing text, OOVs."""

import json

import pytest

from paravg.decode.score import (
    best_setting,
    collapse,
    normalise_hyp,
    per_utt_lines,
    score_set,
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


def write_split(path, hyps_by_setting):
    path.write_text(
        json.dumps(
            {
                "hyps": {"words": hyps_by_setting},
                "frames": 10,
                "nnet_seconds": 0.1,
                "search_seconds": 0.2,
            }
        )
    )


def test_score_set_picks_the_best_setting_and_reports_oovs(tmp_path):
    (tmp_path / "words.txt").write_text("<eps> 0\nA 1\nB 2\n")
    (tmp_path / "text").write_text("u1 A B\nu2 A ZED\n")
    write_split(tmp_path / "s0.json", {"10_0": {"u1": "A B"}, "11_0": {"u1": "A"}})
    write_split(tmp_path / "s1.json", {"10_0": {"u2": "A"}, "11_0": {"u2": "A"}})
    res = score_set(
        [tmp_path / "s0.json", tmp_path / "s1.json"],
        tmp_path / "scores.json",
        tmp_path,
        tmp_path / "words.txt",
        tmp_path / "text",
    )
    assert res["wer_setting"] == "10_0" and res["lmwt"] == 10.0
    assert res["wer"] == pytest.approx(25.0)  # ZED deleted: 1 error of 4 words
    assert res["oov"]["count"] == 1 and res["oov"]["first_utterance"] == {"ZED": "u2"}
    assert "u2 #csid 1 0 0 1" in (tmp_path / "wer_details" / "per_utt").read_text()
    assert res["timing"]["frames"] == 20


def test_tuned_setting_is_applied(tmp_path):
    (tmp_path / "words.txt").write_text("<eps> 0\nA 1\nB 2\n")
    (tmp_path / "text").write_text("u1 A B\n")
    write_split(tmp_path / "s0.json", {"10_0": {"u1": "A B"}, "11_0": {"u1": "A"}})
    (tmp_path / "dev.json").write_text(json.dumps({"wer_setting": "11_0"}))
    res = score_set(
        [tmp_path / "s0.json"],
        tmp_path / "scores.json",
        tmp_path,
        tmp_path / "words.txt",
        tmp_path / "text",
        tuned_json=tmp_path / "dev.json",
    )
    assert res["wer_setting"] == "11_0" and res["wer"] == pytest.approx(50.0)


def test_set_without_text_is_decoded_but_not_scored(tmp_path):
    (tmp_path / "words.txt").write_text("<eps> 0\nA 1\n")
    write_split(tmp_path / "s0.json", {"10_0": {"u1": "A"}})
    res = score_set(
        [tmp_path / "s0.json"],
        tmp_path / "scores.json",
        tmp_path,
        tmp_path / "words.txt",
        tmp_path / "no_text",
    )
    assert res["wer"] is None and "no text" in res["wer_note"]
    assert (tmp_path / "wer_details" / "per_utt").read_text() == ""


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
