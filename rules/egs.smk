# egs stage rules: Kaldi's steps/nnet3/get_egs.sh as a PARAVG (package: paravg.egs).
#   checkpoint egs (plan: held-out utterances, split jobs, number of archives -> info.json)
#   -> egs_split, one per split job j (fan-out): chunk its utterances, write each eg into
#      the piece of the archive drawn for it (paravg/egs/pieces.py)
#   -> egs_archive, one per archive a (fan-in): read its piece of every job, full shuffle
#   -> egs_subsets: valid_diag, train_diag, combine (from the held-out / train-subset lists)
# The number of archives is data-dependent, so `egs` is a checkpoint; everything after it
# has a static shape (egs.nj jobs; archives are enumerated by egs_all_files / the schedule).


checkpoint egs:
    input:
        **PARAVG.egs.source_files(),
        # Kaldi expands the held-out set over all copies of a source utterance
        # (prepare_data always writes it: the identity when the source has none)
        utt2uniq=LAYOUT.data_file(PARAVG.train_set, "utt2uniq"),
    output:
        info=LAYOUT.egs_info(),
        valid=LAYOUT.egs_list("valid"),
        train_subset=LAYOUT.egs_list("train_subset"),
        jobs=expand(LAYOUT.egs_list("job.{j}"), j=range(config["egs"]["nj"])),
    params:
        lists_dir=layout_param("egs_lists_dir"),
        egs=config["egs"],
        context=PARAVG.egs.context(),
        num_targets=config["data"]["num_targets"],
    log:
        LAYOUT.log("egs", "plan"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Text tables plus one pass over every target vector and i-vector matrix (lengths
    # only are kept: ~100 bytes per utterance). Minutes even for 1000 h.
    resources:
        mem_mb=from_dag("mem_mb", "egs"),  # paravg/resources.py
        runtime=from_dag("runtime", "egs"),
    script:
        "../scripts/egs_plan.py"


rule egs_split:
    input:
        **PARAVG.egs.source_files(without="utt2num_frames"),
        info=LAYOUT.egs_info(),
        uttlist=LAYOUT.egs_list("job.{j}"),
    output:
        **{k: temp(v) for k, v in PARAVG.egs.split_files("{j}").items()},
    log:
        LAYOUT.log("egs_split", "{j}"),
    benchmark:
        LAYOUT.benchmark("egs_split", "{j}")
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Streams its utterance list twice (count, then write); holds one 8-MB buffer of egs
    # (paravg.egs.split.BUFFER_BYTES), written to its pieces with pwrite (no memory map),
    # plus its own utterances' scp lines (~3 KB each; the corpus's scp streamed past).
    resources:
        mem_mb=from_dag("mem_mb", "egs_split"),  # paravg/resources.py
        runtime=from_dag("runtime", "egs_split"),
    script:
        "../scripts/egs_split.py"


rule egs_archive:
    input:
        info=LAYOUT.egs_info(),
        jobs=PARAVG.egs.split_jobs_files(),
    output:
        **PARAVG.egs.fields(LAYOUT.egs_prefix("{a}")),
    params:
        job_prefixes=PARAVG.egs.split_prefixes(),
    log:
        LAYOUT.log("egs_archive", "{a}"),
    benchmark:
        LAYOUT.benchmark("egs_archive", "{a}")
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Reads only its pieces (memory-mapped row ranges of the job files) into its own
    # memory-mapped output: one archive, ~(lc+F+rc) x D x 2 bytes per eg, plus its keys
    # (~100 bytes per eg): ~0.6 GB at Kaldi's 400k egs per archive, 40-dim features.
    resources:
        mem_mb=from_dag("mem_mb", "egs_archive"),  # paravg/resources.py
        runtime=from_dag("runtime", "egs_archive"),
    script:
        "../scripts/egs_archive.py"


rule egs_subsets:
    input:
        **PARAVG.egs.source_files(without="utt2num_frames"),
        info=LAYOUT.egs_info(),
        valid=LAYOUT.egs_list("valid"),
        train_subset=LAYOUT.egs_list("train_subset"),
    output:
        valid_diag=PARAVG.egs.subset_files("valid_diag"),
        train_diag=PARAVG.egs.subset_files("train_diag"),
        combine=PARAVG.egs.subset_files("combine"),
    params:
        prefixes=PARAVG.egs.subset_prefixes(),
    log:
        LAYOUT.log("egs_subsets", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # All egs of the held-out and train-subset utterances in memory (Kaldi: 300 + 300
    # utterances, ~(lc+F+rc)/F x their features, float16: a few hundred MB at most).
    resources:
        mem_mb=from_dag("mem_mb", "egs_subsets"),  # paravg/resources.py
        runtime=from_dag("runtime", "egs_subsets"),
    script:
        "../scripts/egs_subsets.py"


rule egs_all:
    # A named target for everything the egs stage makes (used by tests and to prepare
    # data once for several later runs): `snakemake egs_all`.
    input:
        from_dag("egs.all_files"),
    default_target: False
