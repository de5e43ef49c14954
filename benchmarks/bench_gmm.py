"""What the GMM stages cost (issue 38, item 7): CPU seconds per hour of audio for each GMM
stage of a finished run with ``data.targets: gmm``, beside the NN training stage.

Reads every job's own resource line from its log (``logs/<rule>/**/*.log``: ``job
resources: cpu_s=… max_rss_mb=…``, written by the job at its end, ``paravg/logs.py``;
exact, where ``benchmark:`` TSVs sample every 0.5 s and miss short jobs). The stages, as
Kaldi's scripts split them:

==========  ===============================================================  ===========
stage       rules (Kaldi)                                                    per hour of
==========  ===============================================================  ===========
lang        gmm_dict, gmm_lang (prepare_lang.sh)                             (once)
feats       gmm_feats (make_mfcc.sh 13 + CMVN + add-deltas)                  every set
mono        gmm_mono_init, gmm_align_equal, gmm_acc/est/realign of mono      train
            (train_mono.sh)
tree        gmm_tree_acc, gmm_tree, gmm_convert_ali (train_deltas.sh's       train
            acc-tree-stats … gmm-mixup, convert-ali)
tri         gmm_acc/est/realign of tri (train_deltas.sh's EM)                train
align       gmm_mono_align_si (train), gmm_align_set (every set)             aligned
            (align_si.sh)
targets     gmm_targets (ali-to-pdf)                                         every set
graph       graph_gmm_words (mkgraph.sh: HCLG of the triphone model)         (once)
NN train    init_model, train_job, train_block, diagnostics, combine         train
            (train_dnn.py)
==========  ===============================================================  ===========

Hours are the prepared sets' audio (``results/data/<set>/report.json``,
``duration_s_checked``). The wall time of the GMM stages is from the first GMM job's
log line to the last one's (they run ahead of the data stage: every set's
``prepare_data`` reads its GMM targets).

    .venv/bin/snakemake --profile profiles/local        # the demo, data.targets: gmm
    .venv/bin/python benchmarks/bench_gmm.py            # reads ./logs and ./results
    .venv/bin/python benchmarks/bench_gmm.py --workspace /tmp/run --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paravg.logs import read_job_resources  # noqa: E402

#: stage -> (rules, which sets' audio it reads: "train", "all", "aligned" or None)
STAGES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "lang": (("gmm_dict", "gmm_lang"), None),
    "feats": (("gmm_feats",), "all"),
    "mono": (("gmm_mono_init", "gmm_align_equal", "gmm_acc/mono", "gmm_est/mono",
              "gmm_realign/mono"), "train"),
    "tree": (("gmm_tree_acc", "gmm_tree", "gmm_convert_ali"), "train"),
    "tri": (("gmm_acc/tri", "gmm_est/tri", "gmm_realign/tri"), "train"),
    "align": (("gmm_mono_align_si", "gmm_align_set"), "aligned"),
    "targets": (("gmm_targets",), "all"),
    "graph": (("graph/gmm_words.log",), None),
    "NN train": (("init_model", "train_job", "train_block", "diagnostics", "combine"), "train"),
}  # fmt: skip
GMM_STAGES = ("lang", "feats", "mono", "tree", "tri", "align", "targets", "graph")
#: a log line's time stamp (paravg.logs' format)
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _logs(ws: Path, spec: str) -> list[Path]:
    """The logs under ``logs/<spec>`` (a rule, ``<rule>/<sys>`` of the EM rules, or one
    log file)."""
    base = ws / "logs" / spec
    return [base] if base.is_file() else sorted(base.rglob("*.log"))


def _span(log: Path) -> tuple[float, float] | None:
    """The first and last time stamps of a log (epoch seconds)."""
    stamps = []
    for line in log.read_text(errors="replace").splitlines():
        m = STAMP.match(line)
        if m:
            stamps.append(
                datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp() + int(m[2]) / 1e3
            )
    return (stamps[0], stamps[-1]) if stamps else None


def set_hours(ws: Path) -> dict[str, float]:
    """Audio hours of every prepared set."""
    out = {}
    for report in sorted((ws / "results" / "data").glob("*/report.json")):
        out[report.parent.name] = json.loads(report.read_text())["duration_s_checked"] / 3600
    return out


def measure(ws: Path, train_set: str = "train") -> dict:
    hours = set_hours(ws)
    if train_set not in hours:
        raise SystemExit(f"{ws}/results/data/{train_set}/report.json: no prepared training set")
    aligned = hours[train_set] + sum(hours.values())  # align_si of train, then every set
    per = {"train": hours[train_set], "all": sum(hours.values()), "aligned": aligned, None: None}
    stages, first, last = {}, None, None
    for stage, (rules, of) in STAGES.items():
        jobs, cpu, rss, missing = 0, 0.0, 0.0, 0
        for spec in rules:
            for log in _logs(ws, spec):
                jobs += 1
                r = read_job_resources(log)
                if r is None:
                    missing += 1
                    continue
                cpu += r["cpu_s"]
                rss = max(rss, r["max_rss_mb"])
                span = _span(log) if stage in GMM_STAGES and stage != "graph" else None
                if span:
                    first = span[0] if first is None else min(first, span[0])
                    last = span[1] if last is None else max(last, span[1])
        h = per[of]
        stages[stage] = {
            "jobs": jobs,
            "cpu_s": round(cpu, 2),
            "hours": round(h, 4) if h else None,
            "cpu_s_per_hour": round(cpu / h, 1) if h else None,
            "max_rss_mb": round(rss, 1),
            "missing": missing,
        }
    gmm_cpu = sum(stages[s]["cpu_s"] for s in GMM_STAGES)
    return {
        "hours": {k: round(v, 4) for k, v in hours.items()},
        "stages": stages,
        "gmm_cpu_s": round(gmm_cpu, 2),
        "gmm_wall_s": round(last - first, 1) if first is not None else None,
        "nn_train_cpu_s": stages["NN train"]["cpu_s"],
    }


def table(m: dict) -> str:
    nn = m["stages"]["NN train"]["cpu_s_per_hour"]
    lines = [
        "| stage | jobs | CPU s | hours of audio | CPU s per hour | × NN train | peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage, s in m["stages"].items():
        ph = s["cpu_s_per_hour"]
        ratio = f"{ph / nn:.2f}" if ph and nn else "–"
        lines.append(
            f"| {stage} | {s['jobs']} | {s['cpu_s']:.1f} | {s['hours'] or '–'} | "
            f"{ph if ph is not None else '– (once)'} | {ratio} | {s['max_rss_mb']:.0f} |"
            + (f" ({s['missing']} logs without a resource line)" if s["missing"] else "")
        )
    lines.append(
        f"\nGMM stages: {m['gmm_cpu_s']:.1f} CPU s in all, {m['gmm_wall_s']} s wall from the "
        f"first GMM job to the last set's targets; NN training {m['nn_train_cpu_s']:.1f} CPU s."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", type=Path, default=Path("."), help="a finished run's dir")
    ap.add_argument("--train-set", default="train")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if not (args.workspace / "logs" / "gmm_tree").is_dir():
        raise SystemExit(f"{args.workspace}/logs/gmm_tree: not a run with data.targets: gmm")
    m = measure(args.workspace, args.train_set)
    print(table(m))
    if args.json:
        args.json.write_text(json.dumps(m, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
