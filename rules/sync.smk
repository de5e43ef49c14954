# The sync nodes, one per iteration and off the critical path: no train job waits for
# them (the jobs form their start models themselves from the same inputs, bit for bit).
# paravg.sync.nodes.NODE_KINDS says which nodes there are and which a method has:
# `average` writes <t>.pt (Kaldi's nnet3-average), `bmuf` the block state that the jobs of
# t + 1 read, `consensus` the mean of the decentralized jobs. The EMA model follows the
# synced models, read by no job.
from paravg.sync.nodes import NODE_KINDS


for node in NODE_KINDS.values():
    # One rule per kind of sync node (paravg.sync.nodes.NODE_KINDS), for the experiments
    # whose method has it: its files per index (per (index, job) on the per-job axis:
    # delay-by-one's mix_node, which writes learner j's start <t>/job<j>.start.pt from the
    # neighbours' starts of t − 2 and its own job of t − 3, so that it runs while the
    # learner's job of t − 2 trains and job (t − 1, j) waits for no neighbour's job: Cui et
    # al.'s overlap) are the kind's outputs, its params the kind's rule contract.

    rule:
        name:
            node.name
        input:
            unpack(from_dag("train.node_inputs", node.name)),
        output:
            **{
                role: job_output(path) if role in node.temporary else path
                for role, path in PARAVG.train.node_outputs(node.name).items()
            },
        wildcard_constraints:
            exp=PARAVG.experiments_pattern(PARAVG.experiments_with_node(node.name)),
            t=PARAVG.index_after_frontier(node.frontier),
        params:
            node=from_dag("train.node_params", node.name),
        log:
            LAYOUT.log(node.name, node.log_pattern),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=node.mem_mb,  # N models in memory at once (BMUF: and g, delta, s)
            runtime=15,
        script:
            "../scripts/sync_node.py"


rule ema:
    input:
        unpack(from_dag("train.ema_inputs")),
    output:
        LAYOUT.ema_model("{exp}", "{t}"),
    wildcard_constraints:
        exp=PARAVG.experiments_pattern(PARAVG.experiments_with_ema()),
        t=PARAVG.index_after_frontier("ema"),
    params:
        decay=from_dag("train.ema_decay"),
    log:
        LAYOUT.log("ema", "{exp}/{t}"),
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
        unpack(from_dag("train.eval_ema_inputs")),
    output:
        LAYOUT.eval_ema_result("{exp}", "{set}"),
    wildcard_constraints:
        exp=PARAVG.experiments_pattern(PARAVG.experiments_with_ema()),
    params:
        tolerance=config["egs"]["targets_length_tolerance"],
    log:
        LAYOUT.log("evaluate_ema", "{exp}/{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate.py"
