"""Rule score: WER and PER of one (experiment, eval set), as local/score.sh."""

from pathlib import Path

from paravg.decode.score import score_set
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
score_set(
    split_jsons=snakemake.input.splits,
    out_json=snakemake.output.scores,
    details_dir=Path(snakemake.output.wer_details).parent.parent,
    words_txt=snakemake.input.words,
    text_path=snakemake.params.text,
    targets_scp=snakemake.params.targets,
    tuned_json=snakemake.input.get("tuned"),
)
