# Training: init (LDA-like transform, 0.pt) -> per iteration t: N_t train jobs (fan-out)
# -> average (fan-in) -> t+1 ... Kaldi numbering: <t>.pt is the model at the start of
# iteration t; the jobs of iteration t write <t+1>/job<j>.pt; syncing them gives <t+1>.pt.


rule init_model:
    input:
        info=f"{RESULTS}/egs/info.json",
        egs=get_lda_egs,
    output:
        model=f"{RESULTS}/exp/{{exp}}/0.pt",
        stats=f"{RESULTS}/exp/{{exp}}/init.json",
    params:
        archives=lambda wc: [egs_prefix(a) for a in lda_archives()],
        model=lambda wc: EXPERIMENTS[wc.exp]["model"],
        use_ivector=lambda wc: EXPERIMENTS[wc.exp]["ivector_enabled"],
        srand=lambda wc: EXPERIMENTS[wc.exp]["trainer"]["srand"],
        num_targets=config["data"]["num_targets"],
    log:
        "logs/init_model/{exp}.log",
    benchmark:
        f"{RESULTS}/benchmarks/init_model/{{exp}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # LDA stats are dim x dim doubles; egs are memory-mapped
        runtime=30,
    script:
        "../scripts/init_model.py"


rule train_job:
    input:
        model=lambda wc: f"{exp_dir(wc.exp)}/{int(wc.t) - 1}.pt",
        egs=get_job_egs,
    output:
        model=job_output(f"{RESULTS}/exp/{{exp}}/{{t}}/job{{j}}.pt"),
        stats=f"{RESULTS}/exp/{{exp}}/{{t}}/job{{j}}.json",
    params:
        job=get_job_params,
    wildcard_constraints:
        exp=experiments_pattern(decentralized=False),
    log:
        "logs/train_job/{exp}/{t}/job{j}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_job/{{exp}}/{{t}}/job{{j}}.tsv"
    conda:
        "../envs/paravg.yaml"
    # One thread per job: jobs are the parallelism (Kaldi runs one process per GPU), and a
    # fixed thread count keeps CPU results bit-identical across reruns.
    threads: 1
    resources:
        mem_mb=2000,  # model + one memory-mapped archive
        runtime=60,
        gpu=gpu_for_training,
    script:
        "../scripts/train_job.py"


rule average:
    input:
        unpack(get_average_inputs),
    output:
        model=f"{RESULTS}/exp/{{exp}}/{{t}}.pt",
        summary=f"{RESULTS}/exp/{{exp}}/sync/{{t}}.json",
    wildcard_constraints:
        t=r"[1-9]\d*",
        exp=experiments_pattern(fan_in="average"),
    params:
        iteration=lambda wc: int(wc.t) - 1,
        threshold=lambda wc: EXPERIMENTS[wc.exp]["sync"]["objf_threshold"],
    log:
        "logs/average/{exp}/{t}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models in memory at once
        runtime=15,
    script:
        "../scripts/average.py"


rule diagnostics:
    input:
        unpack(get_diag_inputs),
    output:
        f"{RESULTS}/exp/{{exp}}/diag/{{t}}.json",
    params:
        valid=egs_subset_prefix("valid_diag"),
        train=egs_subset_prefix("train_diag"),
    log:
        "logs/diagnostics/{exp}/{t}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    script:
        "../scripts/diagnostics.py"
