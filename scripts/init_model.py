"""Rule init_model: LDA-like transform from the egs, Kaldi initialisation -> 0.pt."""

from paravg.io import read_json
from paravg.logs import setup_logging
from paravg.nnet.initialize import init_model

setup_logging(snakemake.log[0])
num_targets = snakemake.params.num_targets
if num_targets is None:  # a chain model with the biphone tree: its pdfs (chain_den)
    num_targets = int(read_json(snakemake.input.chain_info[0])["num_pdfs"])
init_model(
    info_path=snakemake.input.info,
    archives=snakemake.params.init["archives"],
    model_cfg=snakemake.params.model,
    use_ivector=snakemake.params.use_ivector,
    srand=snakemake.params.srand,
    num_targets=num_targets,
    model_out=snakemake.output.model,
    stats_out=snakemake.output.stats,
    record={"plan": {"fingerprint": snakemake.params.init["fingerprint"]}},
)
