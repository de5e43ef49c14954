"""The results table: held-out frame accuracy and cross-entropy per experiment and set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from paravg.io import read_json, write_text_atomic


def collect_results(
    exp_root: str | Path, experiments: Sequence[str], eval_sets: Sequence[str]
) -> list[dict]:
    rows = []
    for exp in experiments:
        final = read_json(Path(exp_root) / exp / "final.json")
        for s in eval_sets:
            r = read_json(Path(exp_root) / exp / "eval" / f"{s}.json")
            rows.append(
                {
                    "experiment": exp,
                    "set": s,
                    "frame_accuracy": r["frame_accuracy"],
                    "cross_entropy": r["cross_entropy"],
                    "frames": r["frames"],
                    "combined_models": final.get("combined_from"),
                }
            )
    return rows


def format_markdown(rows: list[dict]) -> str:
    head = (
        "| experiment | eval set | frame accuracy | cross-entropy (nats/frame) | frames "
        "| models combined |\n"
    )
    head += "|---|---|---|---|---|---|\n"
    body = "".join(
        f"| {r['experiment']} | {r['set']} | {r['frame_accuracy']:.4f} | {r['cross_entropy']:.4f} "
        f"| {r['frames']} | {r['combined_models']} |\n"
        for r in rows
    )
    return head + body


def format_tsv(rows: list[dict]) -> str:
    cols = ["experiment", "set", "frame_accuracy", "cross_entropy", "frames", "combined_models"]
    return "\t".join(cols) + "\n" + "".join("\t".join(str(r[c]) for c in cols) + "\n" for r in rows)


def write_results_table(exp_root, experiments, eval_sets, md_out, tsv_out) -> list[dict]:
    rows = collect_results(exp_root, experiments, eval_sets)
    write_text_atomic(md_out, format_markdown(rows))
    write_text_atomic(tsv_out, format_tsv(rows))
    return rows
