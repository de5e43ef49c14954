"""The results table: held-out frame accuracy and cross-entropy per experiment and set,
and with decoding on, WER and PER (``decode/<set>/scores.json``: percent, at the chosen
LM weight and word insertion penalty, shown as ``LMWT/WIP``).

With ``decode.tune_set`` the WER and PER columns are at the setting best on the tuning
set (the figure a paper may report for the other sets); beside each, labelled "own
best", is the setting best on the set itself, what Kaldi's ``score.sh`` prints as
``best_wer`` (optimistic: tuned on the data it reports). Without a tuning set the two
are the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from paravg.errors import ConfigError
from paravg.io import read_json, write_text_atomic
from paravg.layout import Layout


def decode_columns(scores_path: Path) -> dict:
    """WER, PER and their settings from a scores.json (None where not scored)."""
    keys = [f"{u}{k}" for u in ("wer", "per") for k in ("", "_setting", "_own", "_own_setting")]
    if not scores_path.is_file():
        return dict.fromkeys(keys)
    r = read_json(scores_path)
    return {k: r.get(k) for k in keys}


def collect_results(
    exp_root: str | Path,
    experiments: Sequence[str],
    eval_sets: Sequence[str],
    decode: bool = False,
) -> list[dict]:
    """One row per experiment and eval set, read from ``exp_root`` (``<results>/exp``)."""
    layout = Layout.from_exp_root(exp_root)
    rows = []
    for exp in experiments:
        final = read_json(layout.final_summary(exp))
        for s in eval_sets:
            r = read_json(layout.eval_result(exp, s))
            row = {
                "experiment": exp,
                "set": s,
                "frame_accuracy": r["frame_accuracy"],
                "cross_entropy": r["cross_entropy"],
                "frames": r["frames"],
                "combined_models": final.get("combined_from"),
            }
            if "chain_objf" in r:  # a chain model: frame accuracy, cross-entropy null
                row["chain_objf"] = r["chain_objf"]
            if decode:
                row.update(decode_columns(Path(layout.decode_scores(exp, s))))
            rows.append(row)
    return rows


#: a PER cell of a set whose words were scored but that has no phone decode: the run had
#: no phone graph (``data.targets: gmm``: the targets are the tree's pdfs, not phones)
NO_PHONE_GRAPH = "– (no phone graph)"


def _rate(value, setting, missing: str = "n/a") -> str:
    if value is None:
        return missing
    return f"{value:.2f} ({setting.replace('_', '/')})" if setting else f"{value:.2f}"


def _num(value) -> str:
    """A frame accuracy, cross-entropy or chain objective; n/a where not defined (a chain
    model's frame accuracy and cross-entropy, a cross-entropy model's chain objective)."""
    return "n/a" if value is None else f"{value:.4f}"


def format_markdown(rows: list[dict]) -> str:
    """The table; a run with a chain experiment adds the column ``chain objective``
    (per output frame, paravg.chain.evaluate), n/a for the cross-entropy models."""
    decode = bool(rows) and "wer" in rows[0]
    chain = any("chain_objf" in r for r in rows)
    head = "| experiment | eval set | frame accuracy | cross-entropy (nats/frame) | frames "
    head += "| models combined |" + (" chain objective (per frame) |" if chain else "")
    head += (
        " WER % (LMWT/WIP) | WER % own best | PER % (LMWT/WIP) | PER % own best |\n"
        if decode
        else "\n"
    )
    head += "|---|---|---|---|---|---|" + ("---|" if chain else "")
    head += "---|---|---|---|\n" if decode else "\n"
    body = ""
    for r in rows:
        body += (
            f"| {r['experiment']} | {r['set']} | {_num(r['frame_accuracy'])} "
            f"| {_num(r['cross_entropy'])} | {r['frames']} | {r['combined_models']} |"
        )
        if chain:
            body += f" {_num(r.get('chain_objf'))} |"
        if decode:
            for u in ("wer", "per"):
                missing = NO_PHONE_GRAPH if u == "per" and r["wer"] is not None else "n/a"
                body += f" {_rate(r[u], r[f'{u}_setting'], missing)} |"
                body += f" {_rate(r[f'{u}_own'], r[f'{u}_own_setting'], missing)} |"
        body += "\n"
    return head + body


def format_tsv(rows: list[dict]) -> str:
    cols = ["experiment", "set", "frame_accuracy", "cross_entropy", "frames", "combined_models"]
    if any("chain_objf" in r for r in rows):
        cols.append("chain_objf")
    if rows and "wer" in rows[0]:
        cols += [
            f"{u}{k}" for u in ("wer", "per") for k in ("", "_setting", "_own", "_own_setting")
        ]
    return (
        "\t".join(cols)
        + "\n"
        + "".join("\t".join(str(r.get(c)) for c in cols) + "\n" for r in rows)
    )


def check_one_decode_config(exp_root, experiments, eval_sets, decode: Mapping) -> None:
    """Every set's scores were decoded with the config's search options and tuned on the
    config's ``tune_set``; else :class:`ConfigError`, so that no run that ends 0 mixes two
    configs in one table. Snakemake skips a job's params check while a job upstream of a
    checkpoint it depends on is pending (another set's data edit): such a set keeps its
    old decode, and the same command, run again, decodes it anew."""
    tune = decode.get("tune_set")
    layout = Layout.from_exp_root(exp_root)
    stale = []
    for exp in experiments:
        for s in eval_sets:
            path = Path(layout.decode_scores(exp, s))
            if not path.is_file():
                continue
            scores = read_json(path)
            used = scores.get("decode_options")
            if used is not None and used != dict(decode["options"]):
                changed = {k: (used.get(k), v) for k, v in decode["options"].items()
                           if used.get(k) != v}  # fmt: skip
                what = ", ".join(f"{k} {a} (config: {b})" for k, (a, b) in changed.items())
                stale.append(f"{path}: decoded with {what}")
            tuned_on = scores.get("tuned_on")
            want = None
            if tune and tune != s:
                want = layout.decode_scores(exp, tune)  # as the scoring rule records it
            if "tuned_on" in scores and (tuned_on or None) != want:
                stale.append(f"{path}: tuned on {tuned_on}, config: decode.tune_set {tune}")
    if stale:
        raise ConfigError(
            "the results would mix two configs:\n  " + "\n  ".join(stale) + "\nsnakemake did "
            "not redo these in this run (it skips a job's params check while a change of "
            "another set's data is pending); run the same command again"
        )


def write_results_table(
    exp_root, experiments, eval_sets, md_out, tsv_out, decode: bool | Mapping = False
) -> list[dict]:
    """``decode``: whether the run decodes, or ``{"enabled", "options", "tune_set"}``
    (then the scores are checked against the options first)."""
    if isinstance(decode, Mapping):
        if decode["enabled"]:
            check_one_decode_config(exp_root, experiments, eval_sets, decode)
        decode = bool(decode["enabled"])
    rows = collect_results(exp_root, experiments, eval_sets, decode)
    write_text_atomic(md_out, format_markdown(rows))
    write_text_atomic(tsv_out, format_tsv(rows))
    return rows
