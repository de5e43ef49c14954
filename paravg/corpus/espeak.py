"""espeak-ng through its C library (libespeak-ng, GPL-3+: optional, loaded only if present).

The ``espeak-ng`` command line cannot report phoneme timing without mbrola, so the
library's own API is called through ``ctypes`` (speak_lib.h of espeak-ng 1.51):
``espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL, espeakINITIALIZE_PHONEME_EVENTS)``
makes ``espeak_Synth`` run the synth callback with the audio and with events; events of
type ``espeakEVENT_PHONEME`` (7) carry the phoneme mnemonic in ``id.string`` and its start
sample in ``sample``. A phoneme lasts until the next one starts; the last one until the
end of the audio.

Random draws: voices with breath noise (``en-us+f2``: ``breath`` in its variant file) and
the Klatt voices add noise from glibc's process-global ``rand()``. libespeak-ng never
seeds it, so its output depended on how many draws anything else in the process had taken
before (one extra ``rand()`` changes nearly every sample of every later utterance by up
to ~1,200 of 32,768, lengths unchanged: the symptom of the irreproducible demo).
:meth:`Espeak.synthesize` therefore calls ``srand(seed)`` before every utterance, so the
noise of an utterance depends on its own seed only.

This module imports nothing heavy (no numpy): it is also the entry point of the fresh
process each espeak batch runs in (``python -m paravg.corpus.espeak``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

LIBRARY_NAMES = ("libespeak-ng.so.1", "libespeak-ng.so")

AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_PHONEME_EVENTS = 0x0001
INITIALIZE_DONT_EXIT = 0x8000
EVENT_LIST_TERMINATED = 0
EVENT_PHONEME = 7
PARAM_RATE = 1
PARAM_PITCH = 3
POS_CHARACTER = 1
CHARS_UTF8 = 1
DEFAULT_RATE = 175  # words per minute


class _EventId(ctypes.Union):
    _fields_ = (
        ("number", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("string", ctypes.c_char * 8),
    )


class _Event(ctypes.Structure):
    """``espeak_EVENT`` of speak_lib.h."""

    _fields_ = (
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    )


_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


def load_library() -> ctypes.CDLL | None:
    """libespeak-ng, or None when it is not installed."""
    for name in LIBRARY_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    found = ctypes.util.find_library("espeak-ng")  # slow (runs ldconfig): last resort
    if found:
        try:
            return ctypes.CDLL(found)
        except OSError:
            return None
    return None


def espeak_available() -> bool:
    """Whether libespeak-ng can be loaded (nothing is initialised)."""
    return load_library() is not None


@dataclass
class EspeakOutput:
    """Audio (native-endian int16 bytes at ``sample_rate``) and ``(mnemonic, start_sample)``
    phoneme events."""

    samples: bytes
    sample_rate: int
    phonemes: list[tuple[str, int]]


class Espeak:
    """One initialised libespeak-ng per process (the library has global state)."""

    _instance: Espeak | None = None

    def __init__(self) -> None:
        lib = load_library()
        if lib is None:
            raise RuntimeError("libespeak-ng is not installed (apt-get install espeak-ng)")
        self._lib = lib
        rate = lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, 0, None, INITIALIZE_PHONEME_EVENTS | INITIALIZE_DONT_EXIT
        )
        if rate <= 0:
            raise RuntimeError(f"espeak_Initialize failed ({rate})")
        self.sample_rate = int(rate)
        self._chunks: list[bytes] = []
        self._phonemes: list[tuple[str, int]] = []
        self._callback = _Callback(self._on_synth)  # keep a reference: C holds it
        lib.espeak_SetSynthCallback(self._callback)
        lib.espeak_SetParameter.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
        lib.espeak_SetVoiceByName.argtypes = (ctypes.c_char_p,)
        # the symbols of the process (dlopen(NULL)): the srand that libespeak-ng's rand()
        # resolves to, glibc's
        self._srand = ctypes.CDLL(None).srand
        self._srand.argtypes = (ctypes.c_uint,)
        self._srand.restype = None

    @classmethod
    def get(cls) -> Espeak:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def _on_synth(self, wav, num_samples, events) -> int:
        if wav and num_samples > 0:
            self._chunks.append(ctypes.string_at(wav, 2 * num_samples))
        i = 0
        while events[i].type != EVENT_LIST_TERMINATED:
            event = events[i]
            if event.type == EVENT_PHONEME:
                name = bytes(event.id.string).split(b"\0", 1)[0].decode("ascii", "replace")
                self._phonemes.append((name, int(event.sample)))
            i += 1
        return 0

    def synthesize(
        self, text: str, voice: str, rate: int, pitch: int, seed: int = 1
    ) -> EspeakOutput:
        """Speak ``text`` with ``voice`` (e.g. ``en-us+f2``) at ``rate`` wpm and ``pitch``;
        the engine's noise comes from glibc ``rand()`` after ``srand(seed)`` (32 bits;
        glibc's unseeded state is ``srand(1)``)."""
        lib = self._lib
        self._srand(int(seed) & 0xFFFFFFFF)
        if lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ValueError(f"espeak-ng has no voice {voice!r}")
        lib.espeak_SetParameter(PARAM_RATE, int(rate), 0)
        lib.espeak_SetParameter(PARAM_PITCH, int(pitch), 0)
        self._chunks, self._phonemes = [], []
        data = text.encode("utf-8")
        status = lib.espeak_Synth(data, len(data) + 1, 0, POS_CHARACTER, 0, CHARS_UTF8, None, None)
        if status != 0:
            raise RuntimeError(f"espeak_Synth failed ({status}) for {text!r}")
        lib.espeak_Synchronize()
        return EspeakOutput(b"".join(self._chunks), self.sample_rate, list(self._phonemes))


def _main(argv: list[str]) -> int:
    """``python -m paravg.corpus.espeak OUT_DIR`` with a JSON request list on stdin.

    Each request is ``{"text", "voice", "rate", "pitch"[, "seed"]}``; request ``k`` is written to
    ``OUT_DIR/k.pcm`` (raw native int16 samples) and ``OUT_DIR/k.json`` (sample rate and phoneme
    events). Running a batch in a fresh process makes its output depend on the batch only:
    libespeak-ng keeps state between utterances (function-static pitch-flutter counters),
    so the same text synthesized after different utterances differs slightly.
    """
    import json
    import sys
    from pathlib import Path

    out_dir = Path(argv[0])
    requests = json.load(sys.stdin)
    engine = Espeak.get()
    for k, req in enumerate(requests):
        result = engine.synthesize(
            req["text"], req["voice"], req["rate"], req["pitch"], req.get("seed", 1)
        )
        (out_dir / f"{k}.pcm").write_bytes(result.samples)
        meta = {"sample_rate": result.sample_rate, "phonemes": result.phonemes}
        (out_dir / f"{k}.json").write_text(json.dumps(meta))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
