"""Speakers, split and budgets (paravg.corpus.plan)."""

import pytest

from paravg.corpus.engines import ALL_VOICES, ESPEAK_VOICES, FESTIVAL_VOICES, FLITE_VOICES
from paravg.corpus.plan import held_out_split, plan_speakers, variants_per_voice
from paravg.corpus.text import kaldi_transcript
from paravg.errors import ConfigError

NO_ESPEAK = FLITE_VOICES + FESTIVAL_VOICES


@pytest.mark.parametrize(("voices", "speakers"), [(ALL_VOICES, 60), (NO_ESPEAK, 60)])
def test_default_config_gives_at_least_40_speakers(voices, speakers):
    plans = plan_speakers(voices, 20, 0.2, 5, 0)
    assert len(plans) == len({p.speaker for p in plans}) == speakers >= 40
    assert [p.speaker for p in plans] == sorted(p.speaker for p in plans)


def test_variants_scale_when_voices_are_missing():
    assert variants_per_voice(5, 12) == 5
    assert variants_per_voice(5, 6) == 10
    assert variants_per_voice(3, 3) == 12


@pytest.mark.parametrize("voices", [ALL_VOICES, NO_ESPEAK])
@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.5])
def test_split_by_source_voice(voices, fraction):
    plans = plan_speakers(voices, 10, fraction, 5, 0)
    sources = {s: {p.voice.source for p in plans if p.subset == s} for s in ("train", "test")}
    assert sources["train"] and sources["test"]
    assert not sources["train"] & sources["test"]
    # flite slt and festival slt HTS are the same human: one side only
    slt_sides = {p.subset for p in plans if p.voice.source == "slt"}
    assert len(slt_sides) == 1
    # every variant of a voice is on its voice's side
    for voice in voices:
        assert len({p.subset for p in plans if p.voice == voice}) == 1


def test_budgets_add_up_to_minutes():
    plans = plan_speakers(ALL_VOICES, 20, 0.2, 5, 0)
    total = {s: sum(p.budget_seconds for p in plans if p.subset == s) for s in ("train", "test")}
    assert total["train"] == pytest.approx(960.0)
    assert total["test"] == pytest.approx(240.0)


def test_test_sentences_never_in_train():
    plans = plan_speakers(ALL_VOICES, 5, 0.2, 5, 0)
    train = {kaldi_transcript(s) for p in plans if p.subset == "train" for s in p.sentences}
    test = {kaldi_transcript(s) for p in plans if p.subset == "test" for s in p.sentences}
    assert train and test and not train & test


def test_plans_are_seeded():
    a = plan_speakers(ALL_VOICES, 5, 0.2, 5, 7)
    assert a == plan_speakers(ALL_VOICES, 5, 0.2, 5, 7)
    assert a != plan_speakers(ALL_VOICES, 5, 0.2, 5, 8)
    espeak = [p for p in a if p.voice in ESPEAK_VOICES]
    assert all(35 <= p.pitch <= 65 and 0.9 <= p.tempo <= 1.12 for p in espeak)


def test_bad_arguments_are_config_errors():
    with pytest.raises(ConfigError, match=r"demo\.minutes"):
        plan_speakers(ALL_VOICES, 0, 0.2, 5, 0)
    with pytest.raises(ConfigError, match=r"demo\.test_fraction"):
        plan_speakers(ALL_VOICES, 1, 1.0, 5, 0)
    with pytest.raises(ConfigError, match=r"demo\.dev_fraction must be in \[0, 1 - demo\.test_"):
        plan_speakers(ALL_VOICES, 1, 0.6, 5, 0, dev_fraction=0.4)
    with pytest.raises(ConfigError, match=r">= 2 source voices.*demo\.use_espeak"):
        held_out_split(FLITE_VOICES[2:], 0.2)


@pytest.mark.parametrize("voices", [ALL_VOICES, NO_ESPEAK])
def test_the_dev_set_has_its_own_voices_and_leaves_the_test_set_as_it_was(voices):
    """Issue 22: LMWT and WIP are tuned on dev voices that neither train nor test."""
    without = plan_speakers(voices, 20, 0.2, 5, 0)
    plans = plan_speakers(voices, 20, 0.2, 5, 0, dev_fraction=0.1)
    sources = {
        s: {p.voice.source for p in plans if p.subset == s} for s in ("train", "test", "dev")
    }
    assert all(sources.values())
    assert not sources["dev"] & (sources["train"] | sources["test"])
    assert not sources["train"] & sources["test"]
    # the test set is the one without a dev set: same speakers, sentences and budgets
    assert [p for p in plans if p.subset == "test"] == [p for p in without if p.subset == "test"]
    sentences = {s: {x for p in plans if p.subset == s for x in p.sentences} for s in sources}
    assert not sentences["dev"] & (sentences["train"] | sentences["test"])
    seconds = {s: sum(p.budget_seconds for p in plans if p.subset == s) for s in sources}
    assert seconds["dev"] == pytest.approx(0.1 * 20 * 60)
    assert sum(seconds.values()) == pytest.approx(20 * 60)


def test_a_dev_set_that_leaves_no_training_voice_is_refused():
    with pytest.raises(ConfigError, match=r"demo\.dev_fraction 0\.5 with demo\.test_fraction 0\.4"):
        plan_speakers(FLITE_VOICES[:3], 10, 0.4, 5, 0, dev_fraction=0.5)
