"""Rule ubm_est: sum the job statistics and re-estimate the UBM (gmm-global-est)."""

from paravg.ivector.stages import ubm_estimate
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
ubm_estimate(
    ubm_path=snakemake.input.ubm,
    accs=list(snakemake.input.accs),
    out=snakemake.output.ubm,
    out_json=snakemake.output.info,
    remove_low_count_gaussians=snakemake.params.remove_low_count,
)
