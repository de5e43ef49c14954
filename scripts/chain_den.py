"""Rule chain_den: the run's chain setup (topology, tree, phone LM, den and normalisation
FSTs) from the train set's targets (paravg.chain.prepare)."""

import logging
from pathlib import Path

from paravg.chain.prepare import prepare_chain
from paravg.io import read_json
from paravg.kaldi_io import load_scp
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
targets = load_scp(snakemake.input.targets_scp)
info = prepare_chain(
    (targets[u] for u in targets),
    int(snakemake.params.num_targets) or int(read_json(snakemake.input.info)["num_targets"]),
    Path(snakemake.output.info_json).parent,
)
logging.getLogger("chain_den").info("chain setup: %s", info)
