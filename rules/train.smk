# Training: init (LDA-like transform, 0.pt) -> per iteration t: N_t train jobs (fan-out),
# each forming its own start model from what the sync method names (the jobs of t − 1,
# mixed or averaged inside the job), so one node per job is the whole critical path of an
# iteration. Kaldi numbering: <t>.pt is the model at the start of iteration t; the jobs of
# iteration t write <t+1>/job<j>.pt. Files of indices at or below an experiment's
# frontier (paravg.resume) are finished inputs, not jobs: see index_after_frontier.


rule init_model:
    input:
        info=LAYOUT.egs_info(),
        egs=from_dag("train.lda_egs"),
        chain_info=from_dag("chain.init_inputs"),  # the biphone chain tree's pdfs
    output:
        model=LAYOUT.init_model("{exp}"),
        stats=LAYOUT.init_stats("{exp}"),
    params:
        init=from_dag("train.init_params"),
        model=from_dag("model_config"),
        use_ivector=from_dag("uses_ivectors"),
        srand=from_dag("srand"),
        num_targets=from_dag("chain.num_outputs"),  # a chain model's: its tree's pdfs (None: chain_info's)
    log:
        LAYOUT.log("init_model", "{exp}"),
    benchmark:
        LAYOUT.benchmark("init_model", "{exp}")
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
        unpack(from_dag("train.job_inputs")),
    output:
        model=job_output(LAYOUT.job_model("{exp}", "{t}", "{j}")),
        stats=LAYOUT.job_stats("{exp}", "{t}", "{j}"),
    params:
        plan=from_dag("train.job_params"),
    wildcard_constraints:
        exp=for_experiments(writes_start=False),
        t=PARAVG.index_after_frontier("train"),
    log:
        LAYOUT.log("train_job", "{exp}/{t}/job{j}"),
    benchmark:
        LAYOUT.benchmark("train_job", "{exp}/{t}/job{j}")
    conda:
        "../envs/paravg.yaml"
    # One thread per job: jobs are the parallelism (Kaldi runs one process per GPU), and a
    # fixed thread count keeps CPU results bit-identical across reruns.
    threads: 1
    resources:
        mem_mb=2000,  # model + the models its start is formed from + one mapped archive
        runtime=doubling_runtime(60),  # minutes
        gpu=from_dag("train_gpus"),
        # where and how fast it runs: no result depends on them, so never params
        train_device=from_dag("job_device"),
        straggler_factor=from_dag("train.job_straggler_factor"),
    script:
        "../scripts/train_job.py"


use rule train_job as train_job_keep_start with:
    # The same job for methods that read a job's start model later (delay-by-one).
    output:
        model=job_output(LAYOUT.job_model("{exp}", "{t}", "{j}")),
        stats=LAYOUT.job_stats("{exp}", "{t}", "{j}"),
        start=job_output(LAYOUT.job_start("{exp}", "{t}", "{j}")),
    wildcard_constraints:
        exp=for_experiments(writes_start=True),
        t=PARAVG.index_after_frontier("train"),


checkpoint train_block:
    # Block b of iterations is trained: the PARAVG is expanded past it only now (a chain of
    # checkpoints), so it holds about run.block_jobs training jobs at a time.
    input:
        from_dag("train.block_inputs"),
    output:
        LAYOUT.block_done("{exp}", "{b}"),
    params:
        block=from_dag("train.block_params"),
    log:
        LAYOUT.log("train_block", "{exp}/{b}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=200,  # writes one small JSON
        runtime=1,
    script:
        "../scripts/train_block.py"


localrules:
    train_block,


rule diagnostics:
    input:
        unpack(from_dag("train.diag_inputs")),
    output:
        LAYOUT.diag("{exp}", "{t}"),
    params:
        valid=LAYOUT.egs_subset_prefix("valid_diag"),
        train=LAYOUT.egs_subset_prefix("train_diag"),
    wildcard_constraints:
        t=PARAVG.index_after_frontier("diag"),
    log:
        LAYOUT.log("diagnostics", "{exp}/{t}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    script:
        "../scripts/diagnostics.py"
