# Sync strategies beside Kaldi's average (paravg.sync.registry is the one table of them):
# the BMUF fan-in; the decentralized train jobs (ring, random-ring, delay-by-one), whose
# inputs are only the job outputs their start model is mixed from, so a slow job delays
# only the jobs that read it; the consensus model of the decentralized methods and the
# EMA model, both off the critical path (no train job reads them).


rule bmuf:
    input:
        unpack(get_bmuf_inputs),
    output:
        model=f"{RESULTS}/exp/{{exp}}/{{t}}.pt",
        global_model=f"{RESULTS}/exp/{{exp}}/bmuf/{{t}}.pt",
        delta=f"{RESULTS}/exp/{{exp}}/bmuf/{{t}}.delta.pt",
        summary=f"{RESULTS}/exp/{{exp}}/sync/{{t}}.json",
    wildcard_constraints:
        t=r"[1-9]\d*",
        exp=experiments_pattern(fan_in="bmuf"),
    params:
        iteration=lambda wc: int(wc.t) - 1,
        threshold=lambda wc: EXPERIMENTS[wc.exp]["sync"]["objf_threshold"],
        bmuf=lambda wc: EXPERIMENTS[wc.exp]["sync"]["bmuf"],
    log:
        "logs/bmuf/{exp}/{t}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models plus g, delta and the start model in memory
        runtime=15,
    script:
        "../scripts/bmuf.py"


rule train_job_decentralized:
    input:
        unpack(get_decentralized_job_inputs),
    output:
        model=job_output(f"{RESULTS}/exp/{{exp}}/{{t}}/job{{j}}.pt"),
        start=job_output(f"{RESULTS}/exp/{{exp}}/{{t}}/job{{j}}.start.pt"),
        stats=f"{RESULTS}/exp/{{exp}}/{{t}}/job{{j}}.json",
    wildcard_constraints:
        exp=experiments_pattern(decentralized=True),
    params:
        job=get_job_params,
        mix_iteration=lambda wc: get_start_recipe(wc).mix_iteration,
        threshold=lambda wc: EXPERIMENTS[wc.exp]["sync"]["objf_threshold"],
    log:
        "logs/train_job/{exp}/{t}/job{j}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_job/{{exp}}/{{t}}/job{{j}}.tsv"
    conda:
        "../envs/paravg.yaml"
    # As train_job: one thread per job (the jobs are the parallelism; bit-identical reruns).
    threads: 1
    resources:
        mem_mb=2000,  # model + up to three neighbours + one memory-mapped archive
        runtime=60,
        gpu=gpu_for_training,
    script:
        "../scripts/train_job_decentralized.py"


rule consensus:
    input:
        unpack(get_average_inputs),
    output:
        model=f"{RESULTS}/exp/{{exp}}/consensus/{{t}}.pt",
        summary=f"{RESULTS}/exp/{{exp}}/consensus/{{t}}.json",
    wildcard_constraints:
        t=r"[1-9]\d*",
        exp=experiments_pattern(decentralized=True),
    params:
        iteration=lambda wc: int(wc.t) - 1,
        threshold=lambda wc: EXPERIMENTS[wc.exp]["sync"]["objf_threshold"],
    log:
        "logs/consensus/{exp}/{t}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models in memory at once
        runtime=15,
    script:
        "../scripts/consensus.py"


rule ema:
    input:
        unpack(get_ema_inputs),
    output:
        f"{RESULTS}/exp/{{exp}}/ema/{{t}}.pt",
    wildcard_constraints:
        t=r"[1-9]\d*",
        exp=experiments_pattern(ema=True),
    params:
        decay=lambda wc: EXPERIMENTS[wc.exp]["sync"]["ema"]["decay"],
    log:
        "logs/ema/{exp}/{t}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # two models
        runtime=10,
    script:
        "../scripts/ema.py"


rule evaluate_ema:
    input:
        unpack(get_eval_ema_inputs),
    output:
        f"{RESULTS}/exp/{{exp}}/eval/ema/{{set}}.json",
    wildcard_constraints:
        exp=experiments_pattern(ema=True),
    params:
        tolerance=config["egs"]["targets_length_tolerance"],
    log:
        "logs/evaluate_ema/{exp}/{set}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate.py"
