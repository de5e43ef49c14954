"""Rule chain_sup / chain_sup_subset: the chain supervision of every eg of an archive,
beside it (paravg.chain.prepare.archive_supervision)."""

import logging
from pathlib import Path

from paravg.chain.prepare import FrameTargets, archive_supervision, load_chain
from paravg.chain.supervision import SupervisionOptions
from paravg.egs.archive import ArchiveMeta, read_keys
from paravg.io import read_json
from paravg.kaldi_io import load_scp
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
prefix = snakemake.params.prefix
meta = ArchiveMeta.load(f"{prefix}.meta.json")
keys = read_keys(prefix)
chain_dir = Path(snakemake.input.den).parent
# the train set's targets, or the GMM stage's per-frame lang phones (info.json says which)
table = FrameTargets.of(load_scp(snakemake.input.targets_scp), read_json(chain_dir / "info.json"))
utts = {k.rpartition("-")[0] for k in keys}
targets = {u: table[u] for u in utts if u in table}
opts = SupervisionOptions(**snakemake.params.options)
setup = load_chain(chain_dir)
sup = archive_supervision(keys, [meta.frames_per_eg] * len(keys), targets, setup, opts)
sup.save(prefix)
logging.getLogger("chain_sup").info(
    "%s: %d egs, %d with supervision, %d arcs",
    prefix,
    sup.num_rows,
    int(sup.has_supervision().sum()),
    len(sup.arc_src),
)
