"""Rule prepare_data: validate a Kaldi data dir and write the prepared copy."""

from paravg.logs import setup_logging
from paravg.prepare_data import prepare_data_dir

setup_logging(snakemake.log[0])
prepare_data_dir(
    src=snakemake.params.src,
    dst=snakemake.params.data_dir,
    sample_rate=snakemake.params.sample_rate,
    max_missing_fraction=snakemake.params.max_missing_fraction,
    num_targets=snakemake.params.num_targets,
)
