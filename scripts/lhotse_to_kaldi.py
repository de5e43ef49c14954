"""Rule lhotse_to_kaldi: a set's lhotse manifests as a Kaldi data dir (paravg.lhotse)."""

from paravg.lhotse import kaldi_dir_from_manifests
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
kaldi_dir_from_manifests(
    src=snakemake.params.src,
    dst=snakemake.params.dst,
    sample_rate=snakemake.params.sample_rate,
)
