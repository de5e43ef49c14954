"""The model families side by side: training cost per frame, NG-SGD against plain SGD,
peak memory per job, chunk egs against frame egs, and (from a finished run) frame
accuracy, WER and cost on the demo.

Part 1, in this run, on one synthetic archive per family (the demo's dimensions: 40
MFCC + 40 i-vector dims, the demo's number of pdfs), each job trained as paravg's
``train_one_job`` trains it (iteration 1, one thread, CPU):

* the TDNN and the TDNN-F (the families of ``config/experiments/model_families.yaml``):
  frame egs, frames-per-eg 8, minibatch 256, one output frame per eg as a Kaldi DNN job
  trains (``--frame``);
* the TDNN-LSTM (``LSTM_OVERLAY`` below: a demo-sized ``run_tdnn_lstm_1a.sh``): chunk
  egs as ``train_rnn.py`` trains them, whole chunks per minibatch
  (``num_chunk_per_minibatch``), derivative truncation, momentum 0.5 (paravg's plan). The
  archive is cut from synthetic utterances (``--lstm-frames`` frames, lengths uniform in
  200..799) by paravg's own egs code: :func:`paravg.egs.make.chunk_utterances`
  (Kaldi's ``UtteranceSplitter`` with widths 40,30,20 and the initial / final contexts),
  :func:`paravg.egs.make.utterance_egs` and the ``ArchiveWriter`` (a chunked archive of
  mixed structures, as ``egs.chunk_width`` makes them).

For each: the step time per *output frame* with plain SGD and with NG-SGD, as ratios
against the TDNN with NG-SGD (the default); an output frame is a frame with a label and
a derivative: one per eg for the frame egs, the chunk's width (not its extra context
frames) for each chunk of a trained minibatch of the chunk egs (a rule's discarded rest
is not counted); and the peak memory of one job, each measured in a fresh Python process
(its maximum resident set, and what the job added after the imports and the model were
built).

Chunk egs throughput against frame egs: output frames per second of (a) reading and
training: the TDNN's NG-SGD job on frame egs against the TDNN-LSTM's NG-SGD job on chunk
egs (1 / the µs per output frame above); (b) reading alone: iterating the minibatches a
job reads (``frame_minibatches`` with frame 3 and minibatch 256 for the frame archive,
``chunk_minibatches`` with ``num_chunk_per_minibatch`` for the chunk archive, the model's
context, buffer-shuffled) and nothing else, median of ``--repeats`` passes in a fresh
process; with the input rows per output frame each reader hands the model (the window
around one frame of a frame eg; l + w + r per w output frames of a chunk).

Part 2, with ``--results DIR`` (a finished run of
``config/experiments/model_families.yaml``): for each experiment the parameters, the
final frame accuracy and log-prob on the valid and train subsets, the test WER at the
dev set's best LMWT/WIP, and the CPU time of its train jobs and of its decode.

    .venv/bin/python benchmarks/bench_model_families.py [--results results/model_families]
        [--num-egs 4096] [--lstm-frames 16000] [--repeats 3] [--skip-training]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from _harness import FEAT_DIM, IVEC_DIM, REPO, benchmark_cpu_seconds, write_archive

NUM_TARGETS = 200  # the archives' labels (their dims and frames per eg: _harness's)
IVECTOR_PERIOD = 10  # the demo's online i-vector period (frames)

#: The demo-sized TDNN-LSTM: Kaldi's ``egs/wsj/s5/local/nnet3/tuning/run_tdnn_lstm_1a.sh``
#: (input splice -2..2, 3 x (2 relu-renorm 520 + fast-lstmp 520/130/130), label delay 5,
#: chunks 40,30,20 with 40 frames of left context (0 on an utterance's first chunk),
#: 128,64 chunks per minibatch, deriv-truncate-margin 10, momentum 0.5) at the demo TDNN's
#: size: input splice -1..1, 256-dim layers, two LSTMs of 256 cells with projections
#: 64 + 64, 64,32 chunks per minibatch. A config overlay (model, egs, trainer sections) as
#: ``config/experiments/*.yaml`` take it; model context (8, 13).
LSTM_LAYER = {
    "type": "lstm",
    "cell_dim": 256,
    "recurrent_projection_dim": 64,
    "non_recurrent_projection_dim": 64,
    "delay": -3,
    "decay_time": 20,
}
LSTM_OVERLAY = {
    "model": {
        "family": "tdnn_lstm",
        "input_splice": [-1, 0, 1],
        "tdnn_lstm": {
            "output_delay": 5,
            "layers": [
                {"type": "tdnn", "dim": 256},
                {"type": "tdnn", "dim": 256, "splice": [-1, 0, 1]},
                LSTM_LAYER,
                {"type": "tdnn", "dim": 256, "splice": [-3, 0, 3]},
                {"type": "tdnn", "dim": 256, "splice": [-3, 0, 3]},
                LSTM_LAYER,
            ],
        },
    },
    "egs": {
        "chunk_width": "40,30,20",
        "chunk_left_context": 40,
        "chunk_left_context_initial": 0,
        "chunk_right_context_final": 0,
    },
    "trainer": {"num_chunk_per_minibatch": "64,32", "deriv_truncate_margin": 10},
}


def family_configs() -> dict[str, dict]:
    """The model configs of ``config/experiments/model_families.yaml``, resolved."""
    from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config

    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    families = yaml.safe_load((REPO / "config/experiments/model_families.yaml").read_text())
    cfg = validate_config(deep_merge(cfg, families))
    return {name: exp["model"] for name, exp in resolved_experiments(cfg).items()}


def lstm_config() -> dict:
    """``LSTM_OVERLAY`` on the repository config, validated: the resolved model, egs and
    trainer sections of its default experiment."""
    from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config

    cfg = validate_config(deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), LSTM_OVERLAY))
    return resolved_experiments(cfg)["default"] | {"egs": cfg["egs"]}


def write_chunk_archive(prefix: Path, model: dict, egs: dict, num_frames: int) -> int:
    """A chunked archive of synthetic utterances of about ``num_frames`` frames in all,
    cut as paravg cuts chunk egs (module docstring); returns its number of chunks."""
    from paravg.egs.archive import ArchiveWriter, EgsBatch
    from paravg.egs.chunking import ChunkOptions
    from paravg.egs.info import EgsInfo
    from paravg.egs.inputs import Utterance
    from paravg.egs.make import chunk_utterances, meta_for, utterance_egs
    from paravg.nnet.context import model_context

    options = ChunkOptions.from_egs_config(egs)
    left, right, initial, final = options.contexts(*model_context(model))
    rng = np.random.default_rng(0)
    lengths: list[int] = []
    while sum(lengths) < num_frames:
        lengths.append(int(rng.integers(200, 800)))
    utts = [(f"u{k:04d}", T) for k, T in enumerate(lengths)]
    info = EgsInfo(
        num_archives=1,
        frames_per_eg=options.principal,
        egs_per_archive=0,
        num_frames=sum(lengths),
        feat_dim=FEAT_DIM,
        ivector_dim=IVEC_DIM,
        ivector_period=IVECTOR_PERIOD,
        left_context=left,
        right_context=right,
        num_targets=NUM_TARGETS,
        chunk_widths=list(options.widths),
        left_context_initial=initial,
        right_context_final=final,
    )
    meta = meta_for(info, 0)
    batches = []
    for (utt, T), chunks in zip(utts, chunk_utterances(utts, info), strict=True):
        data = Utterance(
            utt,
            rng.standard_normal((T, FEAT_DIM)).astype(np.float32),
            rng.integers(0, NUM_TARGETS, T).astype(np.int32),
            np.ones(T, dtype=bool),
            rng.standard_normal((T // IVECTOR_PERIOD + 1, IVEC_DIM)).astype(np.float32),
        )
        batches.append(utterance_egs(data, chunks, meta, IVECTOR_PERIOD))
    batch = EgsBatch.concatenate(batches, meta)
    with ArchiveWriter(prefix, meta.with_num_egs(len(batch))) as w:
        w.append(batch)
    return len(batch)


def job_spec(cfg: dict, chunk: dict | None):
    """The JobSpec of a benchmark job: iteration 1 (no halving), job 0; ``chunk`` (the
    trainer's ``num_chunk_per_minibatch`` / ``deriv_truncate_margin``): a chunk job with
    paravg's plan's momentum."""
    from paravg.nnet.families import RNN_TRAINER_DEFAULTS, family_of
    from paravg.plan import JobSpec

    common = dict(
        iteration=1,
        job=0,
        learning_rate=1e-3,
        max_param_change=2.0,
        frame=3,
        shuffle_buffer_size=5000,
        dropout_proportion=0.2 if family_of(cfg).dropout else 0.0,
        l2_regularize_factor=0.5,
    )
    if chunk is None:
        return JobSpec(minibatch_size=256, **common)
    return JobSpec(
        minibatch_size=chunk["num_chunk_per_minibatch"],
        chunk_training=True,
        deriv_truncate_margin=chunk["deriv_truncate_margin"],
        momentum=RNN_TRAINER_DEFAULTS["momentum"],
        **common,
    )


def job_minibatches(archive, spec, left: int, right: int):
    """The minibatches a job of ``spec`` reads from ``archive`` (as ``train_one_job``)."""
    from paravg.egs import chunk_minibatches, frame_minibatches

    reader = chunk_minibatches if spec.chunk_training else frame_minibatches
    return reader(
        archive,
        **({} if spec.chunk_training else {"frame": spec.frame}),
        left_context=left,
        right_context=right,
        minibatch_size=spec.minibatch_rule(),
        buffer_size=spec.shuffle_buffer_size,
        seed=spec.seed,
    )


def output_frames(mb) -> int:
    """Labelled frames of a minibatch: one per frame eg, the width per chunk."""
    return mb.size * (mb.chunk[0] if mb.chunk is not None else 1)


def read_egs(cfg: dict, prefix: str, chunk: dict | None, repeats: int) -> dict:
    """Iterate the minibatches of one job ``repeats`` times, nothing else (``--read``):
    seconds per output frame of each pass, input rows per output frame."""
    import torch

    from paravg.egs import EgsArchive
    from paravg.nnet.context import model_context

    torch.set_num_threads(1)
    spec, (left, right) = job_spec(cfg, chunk), model_context(cfg)
    times, frames, rows = [], 0, 0
    for _ in range(repeats):
        frames = rows = 0
        t0 = time.perf_counter()
        for mb in job_minibatches(EgsArchive(prefix), spec, left, right):
            frames += output_frames(mb)
            rows += mb.size * mb.feats.shape[1]
        times.append((time.perf_counter() - t0) / frames)
    return {"s_per_frame": times, "frames": frames, "rows_per_frame": rows / frames}


def one_job(cfg: dict, prefix: str, ng: bool, repeats: int, chunk: dict | None = None) -> dict:
    """Train one job ``repeats`` times (a fresh model each time) in this process: its
    seconds per output frame, this process's peak RSS and the RSS before the job
    (``--job``); ``chunk``: a chunk job (:func:`job_spec`)."""
    import resource

    import torch

    from paravg.egs import EgsArchive
    from paravg.nnet.model_file import new_model
    from paravg.nnet.ng_affine import make_affine_factory
    from paravg.train_job import train_one_job

    torch.set_num_threads(1)
    factory = make_affine_factory({"enabled": ng})
    spec, times, model = job_spec(cfg, chunk), [], None
    frames = 0  # chunk egs: the output frames of the chunks the job trains on
    if chunk is not None:
        from paravg.nnet.context import model_context

        context = model_context(cfg)
        frames = sum(map(output_frames, job_minibatches(EgsArchive(prefix), spec, *context)))
    new_model(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, factory).init_parameters(seed=0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # imports and one model
    for _ in range(repeats):
        model = new_model(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, factory)
        model.init_parameters(seed=0)
        t0 = time.perf_counter()
        stats = train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
        elapsed = time.perf_counter() - t0
        times.append(elapsed / (frames or stats["frames"]))
    return {
        "s_per_frame": times,
        "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "before_job_kb": base,
        "params": sum(p.numel() for p in model.parameters()),
    }


def in_fresh_process(mode: str, **kwargs) -> dict:
    """``one_job`` (``--job``) or ``read_egs`` (``--read``) in a fresh Python process (its
    own peak memory)."""
    out = subprocess.run(
        [sys.executable, __file__, f"--{mode}", json.dumps(kwargs)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_job(cfg: dict, prefix: Path, ng: bool, repeats: int, chunk=None) -> dict:
    """One job configuration in a fresh Python process (its own peak memory)."""
    return in_fresh_process("job", cfg=cfg, prefix=str(prefix), ng=ng, repeats=repeats, chunk=chunk)


def training_cost(num_egs: int, repeats: int, lstm_frames: int) -> None:
    from paravg.nnet.context import model_context

    configs = {}
    for name, cfg in family_configs().items():  # one row per distinct model (not per seed)
        if all(cfg != other for other in configs.values()):
            configs[name] = cfg
    lstm = lstm_config()
    chunk = {k: lstm["trainer"][k] for k in ("num_chunk_per_minibatch", "deriv_truncate_margin")}
    rows, reads = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in configs.items():
            left, right = model_context(cfg)
            prefix = Path(tmp) / f"{name}"
            write_archive(prefix, num_egs, left, right, NUM_TARGETS)
            for ng in (False, True):
                rows[(name, ng)] = measure_job(cfg, prefix, ng, repeats)
        prefix = Path(tmp) / "tdnn_lstm"
        num_chunks = write_chunk_archive(prefix, lstm["model"], lstm["egs"], lstm_frames)
        for ng in (False, True):
            rows[("tdnn_lstm", ng)] = measure_job(lstm["model"], prefix, ng, repeats, chunk)
        for name, cfg, c in (("tdnn", configs["tdnn"], None), ("tdnn_lstm", lstm["model"], chunk)):
            reads[name] = in_fresh_process(
                "read", cfg=cfg, prefix=str(Path(tmp) / name), chunk=c, repeats=repeats
            )
    base = statistics.median(rows[("tdnn", True)]["s_per_frame"])
    print(
        f"\n## Training cost per output frame (one thread, median of {repeats}; {num_egs} "
        f"frame egs, minibatch 256; tdnn_lstm: {num_chunks} chunks of {lstm_frames:,} "
        f"utterance frames, {reads['tdnn_lstm']['frames']:,} output frames trained, "
        f"{chunk['num_chunk_per_minibatch']} chunks per minibatch)\n"
    )
    print(
        "| family | optimiser | params | µs / frame | × TDNN NG-SGD | NG / SGD | peak RSS MB "
        "| job's own MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (name, ng), r in rows.items():
        t = statistics.median(r["s_per_frame"])
        sgd = statistics.median(rows[(name, False)]["s_per_frame"])
        print(
            f"| {name} | {'NG-SGD' if ng else 'SGD'} | {r['params']:,} | {t * 1e6:.1f} "
            f"| {t / base:.2f} | {t / sgd:.2f} | {r['peak_kb'] / 1024:.0f} "
            f"| {(r['peak_kb'] - r['before_job_kb']) / 1024:.0f} |"
        )
    print(
        f"\n## Chunk egs throughput against frame egs (output frames / s, one thread, median "
        f"of {repeats})\n"
    )
    print(
        "| egs | model | input rows / output frame | read only | read + trained (NG-SGD) "
        "| reading's share of the job |"
    )
    print("|---|---|---|---|---|---|")
    rates = {}
    for name, egs in (("tdnn", "frame egs (frame 3, 256)"), ("tdnn_lstm", "chunk egs")):
        read = 1 / statistics.median(reads[name]["s_per_frame"])
        trained = 1 / statistics.median(rows[(name, True)]["s_per_frame"])
        rates[name] = read, trained
        if name == "tdnn_lstm":
            egs = f"chunk egs ({lstm['egs']['chunk_width']}; {chunk['num_chunk_per_minibatch']})"
        print(
            f"| {egs} | {name} | {reads[name]['rows_per_frame']:.2f} | {read:,.0f} "
            f"| {trained:,.0f} | {trained / read:.3f} |"
        )
    (fr, ft), (cr, ct) = rates["tdnn"], rates["tdnn_lstm"]
    print(f"| chunk / frame | | | {cr / fr:.2f} | {ct / ft:.2f} | |")


def run_table(results: Path) -> None:
    """Per experiment and eval set: the row of ``results.tsv`` (frame accuracy,
    cross-entropy, WER at the tuning set's LMWT/WIP), the parameters, and the CPU seconds
    of the experiment's train jobs and of its decode jobs (Snakemake's benchmark files)."""
    print(f"\n## The demo run ({results})\n")
    print(
        "| experiment | params | set | frame accuracy | cross-entropy | WER % | train jobs "
        "CPU s | decode CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = list(csv.DictReader((results / "results.tsv").open(), delimiter="\t"))
    bench = results / "benchmarks"
    for row in rows:
        name = row["experiment"]
        init = json.loads((results / "exp" / name / "init.json").read_text())
        train_cpu = benchmark_cpu_seconds(sorted(bench.glob(f"train_job/{name}/**/*.tsv")))
        decode_cpu = benchmark_cpu_seconds(sorted(bench.glob(f"decode*/{name}/**/*.tsv")))
        print(
            f"| {name} | {init['num_parameters']:,} | {row['set']} "
            f"| {_figure(row['frame_accuracy'], 4)} | {_figure(row['cross_entropy'], 4)} "
            f"| {_figure(row['wer'], 2)} ({row['wer_setting']}) | {train_cpu:.0f} "
            f"| {decode_cpu:.0f} |"
        )


def _figure(value: str, digits: int) -> str:
    """A results.tsv cell as a number, or n/a where the run has none (a chain model has
    no frame accuracy or cross-entropy: its pdfs are not the frame targets)."""
    return "n/a" if value in ("", "None") else f"{float(value):.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num-egs", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument(
        "--lstm-frames", type=int, default=16000, help="utterance frames of the chunk archive"
    )
    ap.add_argument("--job", help=argparse.SUPPRESS)  # internal: one job in this process
    ap.add_argument("--read", help=argparse.SUPPRESS)  # internal: one archive's reading
    args = ap.parse_args()
    if args.job:
        print(json.dumps(one_job(**json.loads(args.job))))
        return
    if args.read:
        print(json.dumps(read_egs(**json.loads(args.read))))
        return
    started = time.perf_counter()
    if not args.skip_training:
        training_cost(args.num_egs, args.repeats, args.lstm_frames)
    if args.results:
        run_table(args.results)
    print(f"\n(benchmark wall time {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
