"""Checkpoint egs: check the inputs, choose held-out utterances and split jobs, write info.

Before info.json is written, every experiment's plan is made on it (paravg.plan), so a
schedule the archives cannot hold (trainer.num_jobs_final above the number of archives)
stops here as one line, before any archive is written. The experiments come from the run's
config, not from a param: a trainer option is no reason to rebuild the egs."""

from paravg.egs.plan import EgsOptions, plan_egs
from paravg.logs import setup_logging
from paravg.plan import experiment_plans

setup_logging(snakemake.log[0])
inp, out, params = snakemake.input, snakemake.output, snakemake.params
left, right = params.context
plan_egs(
    feats_scp=inp.feats_scp,
    utt2num_frames=inp.utt2num_frames,
    targets_scp=inp.targets_scp,
    utt2spk=inp.utt2spk,
    info_out=out.info,
    lists_dir=snakemake.params.lists_dir,
    options=EgsOptions.from_config(params.egs, left, right, params.num_targets),
    ivector_scp=inp.get("ivector_scp"),
    ivector_period_file=inp.get("ivector_period"),
    utt2uniq=inp.utt2uniq,
    check_info=lambda info: experiment_plans(snakemake.config, info),
)
