# egs stage rules: Kaldi's steps/nnet3/get_egs.sh as a DAG (package: paravg.egs).
#   checkpoint egs (plan: held-out utterances, split jobs, number of archives -> info.json)
#   -> egs_split, one per split job j (fan-out): chunk its utterances, pick each eg's archive
#   -> egs_archive, one per archive a (fan-in): gather from every job, full shuffle
#   -> egs_subsets: valid_diag, train_diag, combine (from the held-out / train-subset lists)
# The number of archives is data-dependent, so `egs` is a checkpoint; everything after it
# has a static shape (egs.nj jobs; archives are enumerated by egs_all_files / the schedule).


checkpoint egs:
    input:
        **egs_source_files(),
        # Kaldi expands the held-out set over all copies of a source utterance
        # (prepare_data always writes it: the identity when the source has none)
        utt2uniq=f"{RESULTS}/data/{config['data']['train_set']}/utt2uniq",
    output:
        info=f"{RESULTS}/egs/info.json",
        valid=f"{RESULTS}/egs/lists/valid",
        train_subset=f"{RESULTS}/egs/lists/train_subset",
        jobs=expand(f"{RESULTS}/egs/lists/job.{{j}}", j=range(config["egs"]["nj"])),
    params:
        egs=config["egs"],
        context=egs_context(),
        num_targets=config["data"]["num_targets"],
    log:
        "logs/egs/plan.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Text tables plus one pass over every target vector and i-vector matrix (lengths
    # only are kept: ~100 bytes per utterance). Minutes even for 1000 h.
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/egs_plan.py"


rule egs_split:
    input:
        **{k: v for k, v in egs_source_files().items() if k != "utt2num_frames"},
        info=f"{RESULTS}/egs/info.json",
        uttlist=f"{RESULTS}/egs/lists/job.{{j}}",
    output:
        **{k: temp(v) for k, v in egs_split_files("{j}").items()},
    log:
        "logs/egs_split/{j}.log",
    benchmark:
        f"{RESULTS}/benchmarks/egs_split/{{j}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # One utterance in memory at a time; the job's egs go straight into memory-mapped
    # output files (1/nj of the egs: ~(lc+F+rc)/F x the job's features, float16).
    resources:
        mem_mb=2000,
        runtime=120,
    script:
        "../scripts/egs_split.py"


rule egs_archive:
    input:
        info=f"{RESULTS}/egs/info.json",
        jobs=[f for j in range(config["egs"]["nj"]) for f in egs_split_files(j).values()],
    output:
        **egs_fields(egs_prefix("{a}")),
    params:
        job_prefixes=[egs_split_prefix(j) for j in range(config["egs"]["nj"])],
    log:
        "logs/egs_archive/{a}.log",
    benchmark:
        f"{RESULTS}/benchmarks/egs_archive/{{a}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Gathers in ~64 MB blocks from memory-mapped job files; holds the archive's keys
    # (~100 bytes per eg: 40 MB at Kaldi's 400k egs per archive).
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/egs_archive.py"


rule egs_subsets:
    input:
        **{k: v for k, v in egs_source_files().items() if k != "utt2num_frames"},
        info=f"{RESULTS}/egs/info.json",
        valid=f"{RESULTS}/egs/lists/valid",
        train_subset=f"{RESULTS}/egs/lists/train_subset",
    output:
        valid_diag=egs_subset_files("valid_diag"),
        train_diag=egs_subset_files("train_diag"),
        combine=egs_subset_files("combine"),
    params:
        prefixes={name: egs_subset_prefix(name) for name in ("valid_diag", "train_diag", "combine")},
    log:
        "logs/egs_subsets/all.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # All egs of the held-out and train-subset utterances in memory (Kaldi: 300 + 300
    # utterances, ~(lc+F+rc)/F x their features, float16: a few hundred MB at most).
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../scripts/egs_subsets.py"


rule egs_all:
    # A named target for everything the egs stage makes (used by tests and to prepare
    # data once for several later runs): `snakemake egs_all`.
    input:
        lambda wc: egs_all_files(),
    default_target: False
