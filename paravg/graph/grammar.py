"""ARPA -> G.fst (Kaldi's ``arpa2fst --disambig-symbol=#0 --read-symbol-table=words.txt``).

kaldilm's ``arpa2fst`` is Kaldi's own code. It runs in a subprocess of its own
(``python -m paravg.graph.grammar ARPA WORDS OUT``): importing kaldilm into a process that
has already loaded kaldi_hmm_gmm and kaldifst crashed (different builds of the same
libraries). Before that, the ARPA file is parsed here (:func:`paravg.graph.arpa.read_arpa`)
so a malformed file or a word missing from ``words.txt`` is reported with its line.

G's back-off arcs carry ``#0`` on the input side, ``<s>``/``</s>`` become epsilons
(the end-of-sentence probability is the final weight), as in Kaldi.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paravg.errors import DataError
from paravg.graph.arpa import read_arpa
from paravg.graph.lang import read_symbol_table
from paravg.io import atomic_path


def check_arpa_words(arpa: str | Path, words_txt: str | Path) -> None:
    """Parse ``arpa`` and check every word is in ``words.txt`` (else name the line)."""
    uni, _ = read_arpa(arpa)
    words = read_symbol_table(words_txt)
    missing = sorted(w for w in uni if w not in words)
    if missing:
        lines = Path(arpa).read_text().splitlines()
        lineno = next(i for i, line in enumerate(lines, 1) if missing[0] in line.split()[1:2])
        raise DataError(
            f"{arpa}:{lineno}: {len(missing)} words of the ARPA file are not in {words_txt} "
            f"(first: {missing[:5]})"
        )


def arpa_to_g(arpa: str | Path, words_txt: str | Path, g_fst: str | Path) -> None:
    """Write ``G.fst`` from an ARPA file, in a subprocess that imports only kaldilm."""
    check_arpa_words(arpa, words_txt)
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    with atomic_path(g_fst, suffix=".fst") as tmp:
        args = [str(Path(p).resolve()) for p in (arpa, words_txt, tmp)]
        proc = subprocess.run(
            [sys.executable, "-m", "paravg.graph.grammar", *args],
            capture_output=True,
            text=True,
            env=env,
        )
        if proc.returncode != 0 or not tmp.stat().st_size:
            raise DataError(f"{arpa}: arpa2fst failed:\n{proc.stderr[-2000:]}")


def _main(argv: list[str]) -> int:
    """``python -m paravg.graph.grammar ARPA WORDS OUT``: only kaldilm is imported."""
    import kaldilm

    arpa, words, out = argv
    kaldilm.arpa2fst(
        input_arpa=arpa,
        output_fst=out,
        disambig_symbol="#0",
        read_symbol_table=words,
        max_order=-1,
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
