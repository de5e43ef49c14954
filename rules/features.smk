# features stage rules: hires MFCC per split job (fan-out over features.nj), merged into
# one feats.scp (pointing into the split arks), then per-speaker CMVN stats.
# Kaldi: steps/make_mfcc.sh + steps/compute_cmvn_stats.sh.


rule compute_features:
    input:
        wav_scp=f"{RESULTS}/data/{{set}}/wav.scp",
        utt2spk=f"{RESULTS}/data/{{set}}/utt2spk",
        spk2utt=f"{RESULTS}/data/{{set}}/spk2utt",
        origin=f"{RESULTS}/data/{{set}}/origin",
        report=f"{RESULTS}/data/{{set}}/report.json",
        # every configured set is prepared and checked before any feature job starts
        other_sets_checked=get_other_prepared_reports,
    output:
        ark=f"{RESULTS}/feats/{{set}}/split{{nj}}/feats.{{j}}.ark",
        scp=f"{RESULTS}/feats/{{set}}/split{{nj}}/feats.{{j}}.scp",
        utt2num_frames=f"{RESULTS}/feats/{{set}}/split{{nj}}/utt2num_frames.{{j}}",
        report=f"{RESULTS}/feats/{{set}}/split{{nj}}/report.{{j}}.json",
    wildcard_constraints:
        nj=r"\d+",
    params:
        features=config["features"],
        sample_rate=config["data"]["sample_rate"],
    log:
        "logs/compute_features/{set}.{nj}.{j}.log",
    benchmark:
        f"{RESULTS}/benchmarks/compute_features/{{set}}.{{nj}}.{{j}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # knf is single-threaded; one recording is in memory at a time (1 h of 16 kHz audio =
    # 230 MB float32). Runs at several hundred x real time per core, so an hour of the
    # set's audio per job takes well under a minute; 60 min leaves room for slow pipes.
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/compute_features.py"


rule merge_features:
    input:
        scps=expand(
            f"{RESULTS}/feats/{{set}}/split{{nj}}/feats.{{j}}.scp",
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        utt2num_frames=expand(
            f"{RESULTS}/feats/{{set}}/split{{nj}}/utt2num_frames.{{j}}",
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        reports=expand(
            f"{RESULTS}/feats/{{set}}/split{{nj}}/report.{{j}}.json",
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        # target lengths are checked against the features here, naming the user's line
        targets_scp=f"{RESULTS}/data/{{set}}/targets.scp",
        origin=f"{RESULTS}/data/{{set}}/origin",
        data_report=f"{RESULTS}/data/{{set}}/report.json",
    output:
        feats_scp=f"{RESULTS}/feats/{{set}}/feats.scp",
        utt2num_frames=f"{RESULTS}/feats/{{set}}/utt2num_frames",
        report=f"{RESULTS}/feats/{{set}}/report.json",
    params:
        targets_length_tolerance=config["egs"]["targets_length_tolerance"],
    log:
        "logs/merge_features/{set}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Concatenates small text files and reads the set's targets once (int32 vectors:
    # 4-5 bytes per frame, ~2 GB for 1000 h at 100 frames/s in the worst case).
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/merge_features.py"


rule compute_cmvn:
    input:
        feats_scp=f"{RESULTS}/feats/{{set}}/feats.scp",
        spk2utt=f"{RESULTS}/data/{{set}}/spk2utt",
    output:
        ark=f"{RESULTS}/feats/{{set}}/cmvn.ark",
        scp=f"{RESULTS}/feats/{{set}}/cmvn.scp",
    log:
        "logs/compute_cmvn/{set}.log",
    benchmark:
        f"{RESULTS}/benchmarks/compute_cmvn/{{set}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Reads every feature matrix once, one utterance at a time (I/O bound).
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/compute_cmvn.py"
