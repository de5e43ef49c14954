"""What the benchmarks share, one copy each: the repository's paths, the workspace set-up
(the tiny config's upstream stages, widened egs, copied finished stages; a benchmark
that wants one BLAS thread sets it before it imports numpy or this module), one Snakemake
runner that accounts its CPU, the CPU time of Snakemake ``benchmark:`` TSVs and of sacct
records, the plan of a workspace, synthetic egs archives and the default model's training
job on them, the synthetic i-vector corpus and the i-vector models trained as the
Snakefile's stages train them, vosk runs on an export, and WER through
:func:`paravg.decode.score.score_setting` (a missing hypothesis counts as empty).

A benchmark runs as ``python benchmarks/bench_<name>.py`` (its folder is then first on
``sys.path``) and imports this module as ``_harness``; no benchmark imports another.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import wave
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# paravg from this checkout, whatever is installed; but after the script's folder and
# PYTHONPATH (bench_decode measures the release before with its code first on the path)
_FIRST = 1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if str(REPO) not in sys.path:
    sys.path.insert(_FIRST, str(REPO))

SNAKEFILE = REPO / "Snakefile"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
#: the tiny pipeline's config (the pipeline tests')
TINY = REPO / "tests" / "pipeline" / "tiny.yaml"
TICK = os.sysconf("SC_CLK_TCK")
FRAMES_PER_EG = 8  # the tiny config's egs
#: the upstream stages a training benchmark copies from a finished workspace
UPSTREAM = ("demo", "data", "feats", "ivector", "egs", "graph")


# ------------------------------------------------------------------ CPU accounting
def children_cpu() -> float:
    """User + system CPU seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float | None:
    """utime + stime of process ``pid`` (its threads, not its children; /proc/<pid>/stat);
    None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def process_threads(pid: int) -> int | None:
    """The threads process ``pid`` holds now (/proc/<pid>/status); None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))


def benchmark_cpu_seconds(paths: list[Path]) -> float:
    """Sum of the ``cpu_time`` column of Snakemake ``benchmark:`` files (a file without
    a row or without the column counts 0)."""
    total = 0.0
    for path in paths:
        lines = Path(path).read_text().splitlines()
        if len(lines) >= 2:
            header, values = lines[0].split("\t"), lines[1].split("\t")
            if "cpu_time" in header:
                total += float(values[header.index("cpu_time")])
    return total


def sacct_seconds(total_cpu: str) -> float:
    """sacct's TotalCPU or Elapsed ([D-][HH:]MM:SS[.mmm]) in seconds."""
    days, _, rest = total_cpu.rpartition("-")
    parts = [float(x) for x in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


# ------------------------------------------------------------------ Snakemake
@dataclass
class SnakemakeRun:
    """One Snakemake run: wall seconds, its CPU seconds (the process and its children),
    its output (stdout and stderr together) and exit status."""

    wall: float
    cpu: float
    output: str
    returncode: int


def snakemake_cmd(workdir: Path, *configfiles: Path) -> list[str]:
    """The Snakefile of this checkout run in ``workdir``, with ``configfiles`` (if any)."""
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "--directory", str(workdir)]
    return cmd + (["--configfile", *map(str, configfiles)] if configfiles else [])


def run_snakemake(
    workdir: Path,
    args: list[str],
    configfiles: tuple[Path, ...] | list[Path] = (),
    timeout_s: int | None = None,
    check: bool = True,
    own_snakefile: bool = True,
) -> SnakemakeRun:
    """Run Snakemake in ``workdir`` with ``args``; with ``check``, a failure raises
    RuntimeError with the end of its output. ``timeout_s``: killed (``timeout -k 30``)
    after that many seconds. ``own_snakefile`` False: ``args`` name the Snakefile and
    directory (or Snakemake finds ``workdir``'s own)."""
    if own_snakefile:
        cmd = [*snakemake_cmd(workdir, *configfiles), *map(str, args)]
    else:
        cmd = [SNAKEMAKE, *(["--configfile", *map(str, configfiles)] if configfiles else [])]
        cmd += map(str, args)
    if timeout_s is not None:
        cmd = ["timeout", "-k", "30", str(timeout_s), *cmd]
    cpu, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    run = SnakemakeRun(time.perf_counter() - t0, children_cpu() - cpu, proc.stdout, proc.returncode)
    if check and proc.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(map(str, args))} failed:\n{proc.stdout[-5000:]}")
    return run


def run_measured(cmd: list[str], cwd: Path, timeout_s: int, name: str) -> dict:
    """Run ``cmd`` (snakemake); its own CPU when it starts its first job and at its end
    (the last reading before it exits, polled every 50 ms), its wall time, jobs run and
    the most threads it held at a reading. A failure raises RuntimeError with the end of
    its output, kept whole in ``<tmp>/<name>.failed.log``."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = {"cpu": 0.0, "threads": 0}

    def poll() -> None:
        while p.poll() is None:
            cpu = process_cpu(p.pid)
            threads = process_threads(p.pid)
            if cpu is not None and p.poll() is None:
                last["cpu"] = cpu
                last["threads"] = max(last["threads"], threads or 0)
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    lines, first_cpu = [], None
    for line in p.stdout:
        lines.append(line)
        s = line.strip()
        if first_cpu is None and s.startswith(("rule ", "localrule ")) and s.endswith(":"):
            first_cpu = process_cpu(p.pid)
        if time.perf_counter() - t0 > timeout_s:
            p.kill()
    p.wait()
    poller.join()
    out = "".join(lines)
    if p.returncode:
        log = Path(tempfile.gettempdir()) / f"{name}.failed.log"
        log.write_text(out)
        at = max(out.find("Error in rule"), 0)
        raise RuntimeError(
            f"snakemake failed (exit {p.returncode}; its whole output: {log}):\n"
            f"{out[at : at + 6000]}"
        )
    return {
        "wall": time.perf_counter() - t0,
        "start_cpu": first_cpu or 0.0,
        "end_cpu": last["cpu"],
        "jobs": len(re.findall(r"^Finished jobid", out, re.M)),
        "threads": last["threads"],
    }


def plan_of(configs: list, name: str = "default", info: dict | None = None):
    """The plan of experiment ``name`` under ``configs`` (files or dicts, merged in order
    over nothing: pass the repository's config first), on ``info`` or, without it, the
    egs built in the config's results (relative to the current directory)."""
    from paravg.io import read_json
    from paravg.layout import Layout
    from paravg.plan import experiment_plans
    from paravg.progress import load_config

    config = load_config(configs)
    if info is None:
        info = read_json(Layout(config["results"]).egs_info())
    return experiment_plans(config, info)[name]


# ------------------------------------------------------------------ workspaces
def build_upstream(d: Path) -> None:
    """The tiny config's egs (and every stage before them) built in workspace ``d``."""
    log = d.parent / "upstream.log"
    with open(log, "w") as out:
        cmd = [*snakemake_cmd(d, TINY), "--cores", "2", "egs_all"]
        proc = subprocess.run(cmd, stdout=out, stderr=out)
    if proc.returncode:
        raise RuntimeError(f"building the tiny egs failed:\n{log.read_text()[-3000:]}")


def upstream_workspace(tmp: Path) -> Path:
    """``tmp``/upstream: a workspace with the tiny config's egs built (:func:`build_upstream`)."""
    upstream = tmp / "upstream"
    upstream.mkdir()
    print("building the tiny egs ...", flush=True)
    build_upstream(upstream)
    return upstream


def widen_egs(L, archives: int) -> None:
    """Archive b is a copy of archive b mod a0 of layout ``L``; info.json says
    ``archives`` (its mtime kept: the egs stay up to date)."""
    from paravg.egs.archive import archive_files

    st = os.stat(L.egs_info())
    info = json.loads(Path(L.egs_info()).read_text())
    a0, info["num_archives"] = info["num_archives"], archives
    Path(L.egs_info()).write_text(json.dumps(info))
    os.utime(L.egs_info(), ns=(st.st_atime_ns, st.st_mtime_ns))
    for a in range(a0):
        files = archive_files(L.egs_prefix(a), with_ivectors=True).values()
        for b in range(a0 + a, archives, a0):
            copies = archive_files(L.egs_prefix(b), with_ivectors=True).values()
            for f, copy in zip(files, copies, strict=True):
                if os.path.exists(f):
                    shutil.copy2(f, copy)


def copy_upstream(workspace: Path, dest: Path, results: str) -> None:
    """The finished upstream stages (:data:`UPSTREAM`) of ``workspace`` and Snakemake's
    metadata, copied to ``dest`` with their mtimes."""
    for name in UPSTREAM:
        src = workspace / results / name
        if src.exists():
            shutil.copytree(src, dest / results / name, copy_function=shutil.copy2)
    if (workspace / ".snakemake" / "metadata").exists():
        shutil.copytree(
            workspace / ".snakemake" / "metadata",
            dest / ".snakemake" / "metadata",
            copy_function=shutil.copy2,
        )


# ------------------------------------------------------------------ synthetic egs, training
#: the default model's dims in the synthetic archives, and their frames per eg
FEAT_DIM, IVEC_DIM, NUM_TARGETS, FPE = 40, 40, 40, 8


def default_model_cfg() -> dict:
    """config/config.yaml's model, validated."""
    import yaml

    from paravg.config import validate_config

    return validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))["model"]


def write_archive(
    prefix: Path, n: int, left: int, right: int, num_targets: int = NUM_TARGETS
) -> None:
    """``n`` random float16 frame egs of :data:`FPE` frames with contexts ``left`` and
    ``right`` at the default model's input dims, random labels below ``num_targets``,
    weights 1 (seed 0)."""
    import numpy as np

    from paravg.egs.archive import ArchiveMeta, ArchiveWriter

    meta = ArchiveMeta(n, FPE, left, right, FEAT_DIM, IVEC_DIM, "float16")
    rng = np.random.default_rng(0)
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = rng.standard_normal((n, meta.window, FEAT_DIM)).astype(np.float16)
        w.arrays["labels"][:] = rng.integers(0, num_targets, (n, FPE))
        w.arrays["weights"][:] = 1.0
        w.arrays["ivectors"][:] = rng.standard_normal((n, IVEC_DIM))
        w.set_keys([f"u-{i}" for i in range(n)])


def fresh_model(cfg: dict, ng: bool = False, full_window: bool = False):
    """The TDNN of ``cfg`` at the archives' dims, Kaldi's initialisation (seed 0) and
    output weights N(0, 10⁻⁴); ``full_window``: every layer at every position (the
    baseline of the computation before it followed Kaldi's compiler)."""
    import torch

    from paravg.nnet.ng_affine import make_affine_factory
    from paravg.nnet.tdnn import TdnnModel

    model = TdnnModel(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, make_affine_factory({"enabled": ng}))
    if full_window:
        model.forward = model.forward_full_window
    model.init_parameters(seed=0)
    with torch.no_grad():
        model.output.weight.normal_(0, 0.01)
    return model


def training_spec(minibatch: int):
    """Job 0 of iteration 1 on frame 3 of the egs: learning rate 10⁻³, max-param-change 2."""
    from paravg.train_job import JobSpec

    return JobSpec(
        iteration=1,
        job=0,
        learning_rate=1e-3,
        minibatch_size=minibatch,
        max_param_change=2.0,
        frame=3,
        shuffle_buffer_size=5000,
    )


# ------------------------------------------------------------------ i-vectors
class Timer:
    """CPU seconds per named step: ``timer(name, fn, *args)`` runs ``fn`` and adds its time."""

    def __init__(self):
        self.times: dict[str, float] = {}

    def __call__(self, name, fn, *args, **kwargs):
        t = time.process_time()
        out = fn(*args, **kwargs)
        self.times[name] = self.times.get(name, 0.0) + time.process_time() - t
        return out


def synthetic_ivector_sets(out: Path) -> tuple[dict, dict]:
    """A synthetic training set (40 speakers, ~16 minutes, as the demo) and 15 held-out
    speakers: each set's features, CMVN and spk2utt."""
    import numpy as np

    from paravg.ivector.synthetic import speaker_utterances, write_corpus

    rng = np.random.default_rng(0)
    speakers = speaker_utterances(rng, 55, 8, (150, 450), dim=40)
    names = list(speakers)
    train = write_corpus(out / "train", {s: speakers[s] for s in names[:40]})
    test = write_corpus(out / "test", {s: speakers[s][:5] for s in names[40:]})

    def as_dict(c):
        return {"feats": c.feats_scp, "cmvn": c.cmvn_scp, "spk2utt": c.spk2utt}

    return as_dict(train), as_dict(test)


def train_ivector_models(iv: dict, tr: dict, d: Path, timer: Timer) -> None:
    """The i-vector stages of the Snakefile on set ``tr`` with options ``iv`` (the
    config's ``ivector``), one job after another in ``d``: PCA, the diagonal UBM (init,
    Gaussian selection, EM), the full UBM, the extractor (EM); ``d`` ends with
    pca.npz, ubm.npz and extractor.npz."""
    from paravg.ivector import stages

    nj, sub = iv["nj"], iv["subsample"]
    timer(
        "pca",
        stages.train_pca,
        tr["feats"],
        tr["cmvn"],
        d / "pca.npz",
        iv["pca_dim"],
        iv["splice"],
        iv["pca_max_utts"],
        iv["pca_subsample"],
    )
    timer(
        "ubm",
        stages.init_ubm,
        d / "pca.npz",
        tr["feats"],
        tr["spk2utt"],
        d / "ubm.0.npz",
        d / "ubm.0.json",
        iv["num_gauss"],
        iv["ubm_num_iters_init"],
        iv["ubm_num_frames"],
        sub,
        iv["srand"],
    )
    for j in range(nj):
        timer(
            "ubm",
            stages.ubm_gselect,
            d / "ubm.0.npz",
            d / "pca.npz",
            tr["feats"],
            tr["spk2utt"],
            j,
            nj,
            iv["num_gselect"],
            sub,
            d / f"gs.{j}.npz",
        )
    n = iv["ubm_num_iters"]
    for it in range(n):
        accs = [d / f"uacc.{it}.{j}.npz" for j in range(nj)]
        for j in range(nj):
            timer(
                "ubm",
                stages.ubm_accumulate,
                d / f"ubm.{it}.npz",
                d / "pca.npz",
                tr["feats"],
                tr["spk2utt"],
                d / f"gs.{j}.npz",
                j,
                nj,
                sub,
                accs[j],
            )
        timer(
            "ubm",
            stages.ubm_estimate,
            d / f"ubm.{it}.npz",
            accs,
            d / f"ubm.{it + 1}.npz",
            d / f"ubm.{it + 1}.json",
            it + 1 == n,
        )
    (d / f"ubm.{n}.npz").rename(d / "ubm.npz")
    timer(
        "extractor", stages.init_extractor, d / "ubm.npz", d / "ext.0.npz", iv["dim"], iv["srand"]
    )
    for j in range(nj):
        timer(
            "extractor",
            stages.extractor_posteriors,
            d / "ubm.npz",
            d / "pca.npz",
            tr["feats"],
            tr["spk2utt"],
            j,
            nj,
            sub,
            iv["num_gselect_post"],
            iv["min_post"],
            iv["posterior_scale"],
            d / f"post.{j}.npz",
        )
    n = iv["extractor_num_iters"]
    for it in range(n):
        accs = [d / f"eacc.{it}.{j}.npz" for j in range(nj)]
        for j in range(nj):
            timer(
                "extractor",
                stages.extractor_accumulate,
                d / f"ext.{it}.npz",
                d / "pca.npz",
                tr["feats"],
                tr["spk2utt"],
                d / f"post.{j}.npz",
                j,
                nj,
                sub,
                accs[j],
            )
        timer(
            "extractor",
            stages.extractor_estimate,
            d / f"ext.{it}.npz",
            accs,
            d / f"ext.{it + 1}.npz",
            d / f"ext.{it + 1}.json",
            iv["gaussian_min_count"],
        )
    (d / f"ext.{n}.npz").rename(d / "extractor.npz")


# ------------------------------------------------------------------ vosk, WER
def add_run_arguments(ap, max_utts: int = 20) -> None:
    """The options of a benchmark on a finished run: ``--results`` (its results folder),
    ``--exp``, ``--set`` and ``--max-utts`` (the first utterances of the set)."""
    ap.add_argument("--results", default="results")
    ap.add_argument("--exp", default="default")
    ap.add_argument("--set", default="test")
    ap.add_argument("--max-utts", type=int, default=max_utts)


def test_utterances(L, set_: str, num: int | None) -> tuple[dict, float, dict]:
    """The first ``num`` utterances (sorted ids; all: None) of set ``set_`` of layout ``L``:
    utterance -> wav file, the seconds of audio, utterance -> reference words."""
    wav_scp = Path(L.data_file(set_, "wav.scp")).read_text().splitlines()
    wav_scp = dict(line.split(maxsplit=1) for line in wav_scp)
    utts = sorted(wav_scp)[:num]
    wavs = {u: wav_scp[u].strip() for u in utts}
    audio = 0.0
    for path in wavs.values():
        with wave.open(path) as w:
            audio += w.getnframes() / w.getframerate()
    refs = {}
    for line in Path(L.text(set_)).read_text().splitlines():
        utt, *words = line.split()
        if utt in wavs:
            refs[utt] = words
    return wavs, audio, refs


@dataclass
class VoskRun:
    """vosk's best-path hypotheses, the CPU seconds of its process, its stderr."""

    hyps: dict[str, str]
    cpu: float
    stderr: str


def run_vosk(model_dir: Path, wavs: dict[str, str], log_level: int | None = None) -> VoskRun:
    """vosk (``paravg.export.vosk_run``, one thread, in its own process) on ``wavs``."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs, out = Path(tmp) / "jobs.json", Path(tmp) / "hyps.json"
        job = {"model": str(model_dir), "rate": 16000, "wavs": wavs}
        if log_level is not None:
            job["log_level"] = log_level
        jobs.write_text(json.dumps(job))
        cpu = children_cpu()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "paravg.export.vosk_run", str(jobs), str(out)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        return VoskRun(json.loads(out.read_text()), children_cpu() - cpu, proc.stderr)


def wer(refs: dict[str, list[str]], hyps: dict[str, str]) -> float:
    """WER (%) of ``hyps`` (strings) against ``refs`` (words) over the utterances of
    ``refs``, as paravg's scoring counts it (a missing hypothesis is empty)."""
    from paravg.decode.score import score_setting

    return score_setting(refs, {u: h.split() for u, h in hyps.items()})["rate"]
