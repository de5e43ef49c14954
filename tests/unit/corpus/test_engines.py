"""TTS engines (paravg.corpus.engines): determinism, 16 kHz output, exact segments."""

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from paravg.corpus.engines import (
    ESPEAK_VOICES,
    FESTIVAL_VOICES,
    FLITE_VOICES,
    Request,
    available_voices,
    espeak_segments,
    festival_script,
    synthesize,
)
from paravg.corpus.espeak import espeak_available
from paravg.corpus.labels import SAMPLE_RATE
from paravg.corpus.phones import PHONES
from paravg.corpus.text import vocabulary

INSTALLED = {v.name for v in available_voices(use_espeak=True)}
SENTENCE = "Is the beige cushion violet or gray?"


def _check(syn):
    assert syn.samples.dtype == np.float64 and np.abs(syn.samples).max() <= 1.0
    segs = syn.segments
    assert segs[0].start == 0.0
    assert segs[-1].end == pytest.approx(len(syn.samples) / SAMPLE_RATE)
    assert all(a.end == b.start for a, b in itertools.pairwise(segs))
    assert all(s.end > s.start for s in segs)
    assert {s.phone for s in segs} <= set(PHONES)


@pytest.mark.parametrize("voice", FLITE_VOICES + FESTIVAL_VOICES, ids=lambda v: v.name)
def test_engine_is_deterministic_and_labelled(voice):
    if voice.name not in INSTALLED:
        pytest.skip(f"{voice.name} is not installed")
    requests = [Request(SENTENCE, 0.9), Request(SENTENCE, 1.2)]
    first, second = synthesize(voice, requests), synthesize(voice, requests)
    for a, b in zip(first, second, strict=True):
        _check(a)
        assert np.array_equal(a.samples, b.samples) and a.segments == b.segments
    # the words' phones, in order (silences aside); the stretch slows speech down
    phones = [s.phone for s in first[0].segments if s.phone != "sil"]
    assert phones[:6] == ["ih", "z", "dh", "ah", "b", "ey"]
    assert len(first[1].samples) > 1.15 * len(first[0].samples)


def test_festival_script_quotes_text(tmp_path):
    script = festival_script(FESTIVAL_VOICES[0], [Request('say "hi" \\ now', 1.1)], tmp_path)
    assert '"say \\"hi\\" \\\\ now"' in script
    assert "(Parameter.set 'Duration_Stretch 1.1000)" in script
    hts = festival_script(FESTIVAL_VOICES[2], [Request("x", 1.25)], tmp_path)
    assert '"-r" 0.8000' in hts


def test_espeak_segments_split_and_merge():
    events = [("s", 100), ("e@", 200), (";", 300), ("z", 400), ("_", 500)]
    segs = espeak_segments(events, 600, 100)
    assert [s.phone for s in segs] == ["s", "eh", "r", "z", "sil"]
    # e@ spans 200..400 (";" merged into it), each label half
    assert [(s.start, s.end) for s in segs[1:3]] == [(2.0, 3.0), (3.0, 4.0)]


@pytest.mark.skipif(not espeak_available(), reason="libespeak-ng is not installed")
def test_espeak_maps_every_grammar_phoneme_and_is_deterministic():
    words = sorted(vocabulary())
    requests = [Request(" ".join(words[i : i + 25]) + ".") for i in range(0, len(words), 25)]
    voice = ESPEAK_VOICES[3]
    first = synthesize(voice, requests)  # raises UnknownPhoneError on an unmapped phoneme
    second = synthesize(voice, requests)
    for a, b in zip(first, second, strict=True):
        _check(a)
        assert np.array_equal(a.samples, b.samples) and a.segments == b.segments


@pytest.mark.skipif(shutil.which("flite") is None, reason="flite is not installed")
def test_flite_voices_found():
    assert {"flite_awb", "flite_rms", "flite_slt"} <= INSTALLED


def _espeak_batch_after_draws(tmp_path: Path, requests: list[dict], draws: int) -> list[bytes]:
    """Run an espeak batch in a fresh process that first takes ``draws`` glibc ``rand()``
    draws (as any other library in the process might), return each utterance's samples."""
    out = tmp_path / f"draws{draws}"
    out.mkdir()
    code = (
        "import ctypes, json, sys\n"
        f"for _ in range({draws}): ctypes.CDLL(None).rand()\n"
        "from paravg.corpus.espeak import _main\n"
        "raise SystemExit(_main(sys.argv[1:]))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(out)],
        input=json.dumps(requests),
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    return [(out / f"{k}.pcm").read_bytes() for k in range(len(requests))]


@pytest.mark.skipif(not espeak_available(), reason="libespeak-ng is not installed")
def test_espeak_noise_depends_on_the_utterance_seed_not_on_the_process_rand_state(tmp_path):
    # f2 is the variant with breath noise (glibc rand()): the voice whose first batch
    # differed on a fresh machine. Other draws from rand() in the process before the
    # batch must not change a sample; the utterance's seed must.
    voice = next(v for v in ESPEAK_VOICES if v.engine_voice == "en-us+f2")
    req = {"text": SENTENCE, "voice": voice.engine_voice, "rate": 170, "pitch": 40}
    requests = [{**req, "seed": 7}, {**req, "text": "Is it gray?", "seed": 8}]
    quiet = _espeak_batch_after_draws(tmp_path, requests, 0)
    assert _espeak_batch_after_draws(tmp_path, requests, 3) == quiet
    # another seed: other noise, the same length (nothing but the noise changes)
    (other,) = _espeak_batch_after_draws(tmp_path, [{**req, "seed": 8}], 1)
    a, b = np.frombuffer(quiet[0], dtype=np.int16), np.frombuffer(other, dtype=np.int16)
    assert len(a) == len(b) and not np.array_equal(a, b)
