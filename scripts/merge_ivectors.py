"""Rule merge_ivectors: one ivector_online.scp per set, and ivector_period."""

from paravg.ivector.stages import merge_ivectors
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
merge_ivectors(
    scps=list(snakemake.input.scps),
    out_scp=snakemake.output.scp,
    period=snakemake.params.period,
    out_period=snakemake.output.period,
)
