"""Reading audio (paravg.audio): wav.scp rxfilenames, pipes, WAVs inside arks, and the
module's place below paravg.data. Data dirs with audio are tested in test_data.py."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from paravg.audio import parse_wav_rxfilename
from paravg.errors import DataError

from .audio_reading import read_utterance

RATE = 16000
HAS_SOX = shutil.which("sox") is not None


def noise(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(0, 2000, int(seconds * RATE)), -32768, 32767).astype(np.int16)


def write_wav(path: Path, samples: np.ndarray, rate: int = RATE) -> Path:
    soundfile.write(str(path), samples, rate, subtype="PCM_16")
    return path


def test_audio_does_not_import_the_data_dir_model():
    """paravg.data imports paravg.audio; the other way round would be a cycle."""
    code = "import sys, paravg.audio; assert 'paravg.data' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ rxfilenames and pipes
def test_rxfilename_forms(tmp_path):
    assert parse_wav_rxfilename("a.wav").kind == "file"
    assert parse_wav_rxfilename("sox a.wav -t wav - |").kind == "pipe"
    rx = parse_wav_rxfilename("/x/wav.ark:1234")
    assert (rx.kind, rx.target, rx.offset) == ("offset", "/x/wav.ark", 1234)
    for bad, pattern in [
        ("-", "standard input"),
        ("| gzip > x", "output pipe"),
        (" |", "output pipe"),  # Kaldi checks a leading '|' first
        ("cat a.wav | sox - -t wav -", "pipe symbol in the wrong place"),
        ("ark:/x/wav.ark:12", "table specifier"),
        ("a b.wav", "contains whitespace but is not a pipe"),
        ("x.ark:12[1:3]", "ranges"),
    ]:
        with pytest.raises(DataError, match=pattern):
            parse_wav_rxfilename(bad, "wav.scp:7")


def test_cat_pipe_reads_the_same_samples(tmp_path):
    path = write_wav(tmp_path / "a.wav", noise(0.3, 1))
    direct = read_utterance(str(path), sample_rate=RATE)
    piped = read_utterance(f"cat {path} |", sample_rate=RATE)
    np.testing.assert_array_equal(direct, piped)
    assert direct.max() > 1000  # int16 scale


@pytest.mark.skipif(not HAS_SOX, reason="sox not installed")
def test_sox_pipes(tmp_path):
    path = write_wav(tmp_path / "a.wav", noise(0.3, 1))
    same = read_utterance(f"sox {path} -t wav - |", sample_rate=RATE)
    np.testing.assert_array_equal(same, read_utterance(str(path)))
    # sox writing to a pipe after an effect cannot know the length: streamed header
    faster = read_utterance(f"sox {path} -t wav - speed 1.5 |", sample_rate=RATE)
    assert abs(faster.size - same.size / 1.5) < 200
    with pytest.raises(DataError, match=r"line 9: sample rate 8000 Hz, expected 16000"):
        read_utterance(f"sox {path} -r 8000 -t wav - |", sample_rate=RATE, where="line 9")


def test_pipe_with_zero_length_header_reads_to_eof(tmp_path):
    data = bytearray(write_wav(tmp_path / "a.wav", noise(0.2, 3)).read_bytes())
    struct.pack_into("<I", data, 40, 0)  # data chunk size 0, as some streaming writers do
    (tmp_path / "z.wav").write_bytes(bytes(data))
    got = read_utterance(f"cat {tmp_path / 'z.wav'} |", sample_rate=RATE)
    assert got.size == int(0.2 * RATE)


def test_failing_pipe_reports_command_and_status(tmp_path):
    with pytest.raises(DataError, match=r"wav\.scp:3: command 'exit 3' failed with exit status 3"):
        read_utterance("exit 3 |", where="wav.scp:3")
    with pytest.raises(DataError, match="wrote no audio"):
        read_utterance("true |", where="wav.scp:3")


def test_wav_in_ark_entry(tmp_path):
    samples = noise(0.25, 4)
    kaldiio.save_ark(
        str(tmp_path / "wav.ark"), {"r1": (RATE, samples)}, scp=str(tmp_path / "w.scp")
    )
    entry = (tmp_path / "w.scp").read_text().split()[1]
    got = read_utterance(entry, sample_rate=RATE)
    np.testing.assert_array_equal(got, samples.astype(np.float32))
