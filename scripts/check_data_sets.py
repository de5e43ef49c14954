"""Rule check_data_sets: record that every configured set is prepared and checked."""

from paravg.logs import setup_logging
from paravg.prepare_data import record_checked_sets

setup_logging(snakemake.log[0])
record_checked_sets(dict(snakemake.input.items()), snakemake.output[0])
