"""Rule average: the synced model <t>.pt of iteration t − 1 (Kaldi nnet3-average), off
the critical path: the jobs of iteration t formed the same model themselves."""

from paravg.io import save_torch_atomic, write_json_atomic
from paravg.logs import setup_logging
from paravg.provenance import checksums
from paravg.sync.average import average_jobs

setup_logging(snakemake.log[0])
node = snakemake.params.node
synced, summary = average_jobs(
    model_paths=node["files"]["models"],
    stats_paths=node["files"]["stats"],
    iteration=node["iteration"],
    threshold=node["sync"]["objf_threshold"],
)
digest = save_torch_atomic(snakemake.output.model, synced)
summary["sha256"] = checksums({snakemake.output.model: digest})
write_json_atomic(snakemake.output.summary, summary)
