"""The 40-label set and the engine phone maps (paravg.corpus.phones)."""

import pytest

from paravg.corpus.phones import (
    ARPABET,
    ESPEAK_PHONES,
    FESTIVAL_FOLDING,
    NUM_PHONES,
    PHONE_IDS,
    PHONES,
    UnknownPhoneError,
    espeak_labels,
    festival_label,
    phones_txt,
)

# The CMU/radio phone set festival and flite speak (cmulex phones plus extras/silences).
RADIO_PHONES = [*ARPABET, "ax", "axr", "dx", "el", "em", "en", "hv", "nx", "pau", "h#", "brth"]


def test_forty_labels_with_silence_zero():
    assert NUM_PHONES == 40
    assert PHONES[0] == "sil" and PHONE_IDS["sil"] == 0
    assert len(set(PHONES)) == 40
    assert sorted(PHONE_IDS.values()) == list(range(40))


def test_phones_txt_is_kaldi_symbol_table():
    lines = phones_txt().splitlines()
    assert len(lines) == 40
    assert lines[0] == "sil 0"
    assert all(line.split()[1] == str(i) for i, line in enumerate(lines))


def test_festival_phones_fold_onto_all_labels():
    labels = {festival_label(p) for p in RADIO_PHONES}
    assert labels == set(PHONES)
    assert festival_label("ax") == "ah" and festival_label("pau") == "sil"
    assert festival_label("AY1") == "ay"  # stress digit stripped, case folded
    assert set(FESTIVAL_FOLDING.values()) <= set(PHONES)


def test_espeak_table_covers_every_label():
    targets = {label for labels in ESPEAK_PHONES.values() for label in labels}
    assert targets <= set(PHONES)
    assert targets == set(PHONES)


def test_espeak_mnemonics():
    assert espeak_labels("tS") == ("ch",)
    assert espeak_labels("e@") == ("eh", "r")
    assert espeak_labels("'aI") == ("ay",)  # stress mark stripped
    assert espeak_labels(";") == ()  # modifier, merged into the previous phone
    assert espeak_labels("_:") == ("sil",)


def test_unknown_phones_are_errors():
    with pytest.raises(UnknownPhoneError, match="qq"):
        festival_label("qq")
    with pytest.raises(UnknownPhoneError, match="Q!"):
        espeak_labels("Q!")
