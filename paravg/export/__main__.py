"""``python -m paravg.export --model final.pt --out DIR ...``: a Kaldi / vosk model dir.

With ``--transition-model`` (a Kaldi ``final.mdl``: the GMM model whose pdfs the
network's targets are, e.g. the one behind ``ali-to-pdf``) and ``--graph`` (a dir with
``HCLG.fst``, ``words.txt`` [``phones.txt``, ``phones/word_boundary.int``]) the export
decodes with the user's own graph. Without ``--transition-model`` the demo's monophone
model (one state per phone, pdf = target id) is used, and ``--phone-loop`` writes a
phone-loop graph over the demo's phones.

``python -m paravg.export --verify DIR`` checks an exported directory instead: every file
against the manifest in its ``export.json`` (size and sha256), then vosk loads it and
decodes a second of audio. Exit status 0 when it is intact.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from paravg.errors import ParavgError
from paravg.export.conf import DECODER_DEFAULTS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paravg.export", description=__doc__.split("\n")[0])
    p.add_argument("--verify", metavar="DIR", help="check an exported directory and exit")
    p.add_argument("--model", help="paravg final.pt (required unless --verify)")
    p.add_argument("--out", help="output directory (replaced when complete)")
    p.add_argument("--transition-model", help="Kaldi final.mdl holding the TransitionModel")
    p.add_argument("--graph", help="graph dir: HCLG.fst, words.txt [phones.txt, phones/]")
    p.add_argument("--phone-loop", action="store_true", help="write a phone-loop graph")
    p.add_argument("--ivector-dir", help="paravg results/ivector (pca.npz, ubm.N, extractor.N)")
    p.add_argument("--ubm", help="UBM .npz (default: the highest ubm.N.npz in --ivector-dir)")
    p.add_argument("--extractor", help="extractor .npz (default: highest extractor.N.npz)")
    p.add_argument(
        "--mfcc-options",
        default="",
        help="compute-mfcc-feats options of the training features on top of "
        "conf/mfcc_hires.conf, e.g. '--dither=0'",
    )
    p.add_argument("--sample-frequency", type=float, default=16000.0)
    p.add_argument("--acoustic-scale", type=float, default=0.1)
    # vosk's search defaults (DECODER_DEFAULTS); the pipeline's export section writes the
    # narrower beams measured on the demo (config/config.yaml `export:`: 10 / 3 / 2,000).
    for option, value in DECODER_DEFAULTS.items():
        p.add_argument(f"--{option}", type=type(value), default=value)
    p.add_argument(
        "--endpoint-silence-phones",
        help="colon-separated phone ids for vosk's endpointing (vosk also down-weights "
        "them in its i-vectors); default none",
    )
    p.add_argument("--text", action="store_true", help="Kaldi text format (default binary)")
    return p


def _latest(directory: Path, stem: str) -> Path:
    found = sorted(directory.glob(f"{stem}.*.npz"), key=lambda q: int(q.stem.split(".")[1]))
    if not found:
        raise ParavgError(f"{directory}: no {stem}.N.npz")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.verify:
        return _verify(args.verify, int(args.sample_frequency))
    if not (args.model and args.out):
        parser.error("--model and --out are required (or --verify DIR)")
    from paravg.export.layout import IvectorSystem, export_model
    from paravg.features import MfccOptions

    try:
        mfcc = MfccOptions.from_kaldi_options(
            f"--sample-frequency={args.sample_frequency} {args.mfcc_options}", base="hires"
        )
        ivectors = None
        if args.ivector_dir:
            d = Path(args.ivector_dir)
            ivectors = IvectorSystem(
                d / "pca.npz",
                Path(args.ubm) if args.ubm else _latest(d, "ubm"),
                Path(args.extractor) if args.extractor else _latest(d, "extractor"),
            )
        if args.transition_model:
            tm = args.transition_model
        else:
            from paravg.corpus.phones import NUM_PHONES
            from paravg.export.phone_loop import monophone_transition_model

            tm = monophone_transition_model(NUM_PHONES)[1]
        graph = args.graph
        with tempfile.TemporaryDirectory() as tmp:
            if args.phone_loop and graph is None:
                from paravg.corpus.phones import PHONES
                from paravg.export.phone_loop import write_phone_loop_graph
                from paravg.export.transition_model import TransitionModel

                loop_tm = tm if isinstance(tm, TransitionModel) else TransitionModel.from_file(tm)
                graph = write_phone_loop_graph(loop_tm, list(PHONES), Path(tmp) / "graph", 2.0)
            summary = export_model(
                args.model,
                args.out,
                tm,
                mfcc,
                graph,
                ivectors,
                acoustic_scale=args.acoustic_scale,
                decoder={
                    "beam": args.beam,
                    "lattice_beam": args.lattice_beam,
                    "max_active": args.max_active,
                    "min_active": args.min_active,
                },
                endpoint_silence_phones=args.endpoint_silence_phones,
                binary=not args.text,
            )
    except ParavgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1))
    return 0


def _verify(directory: str, sample_rate: int) -> int:
    from paravg.export.manifest import verify_export

    try:
        summary = verify_export(directory, sample_rate)
    except ParavgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
