# Sourced by the small backbones' head recipes (train-smollm2-real-errors-head.sh,
# train-qwen0.5b-real-errors-head.sh): features of the real step labels' first
# 19 training and 9 validation chunks of 20 problems (scripts/data/real_steps.py's
# files; the extraction is resumable), the validation traces made whole again,
# and TRAIN and VAL, the feature files in order, for stepscore-train.
#
#   real_step_features SHARED_DATA WORKDIR FEATURES_DIR MODEL_FILE STEPSCORE_BIN LAYERS WHOLE_OUT
real_step_features() {
  local shared=$1 work=$2 feats=$3 model=$4 bin=$5 layers=$6 whole=$7
  python3 scripts/data/real_steps.py --data "$shared/real-steps" --out "$work/data"
  for split_chunks in train:19 val:9; do
    python3 scripts/data/extract_features.py --data "$work/data" --out "$feats" --model "$model" \
      --stepscore "$bin" --layers "$layers" --pattern "${split_chunks%:*}" --chunks "${split_chunks#*:}"
  done
  TRAIN=$(for i in $(seq 0 18); do printf "%s " "$feats/train/chunk_$(printf %04d "$i").jsonl"; done)
  VAL=$(for i in $(seq 0 8); do printf "%s " "$feats/val/chunk_$(printf %04d "$i").jsonl"; done)
  # shellcheck disable=SC2086
  python3 scripts/data/assemble_trajectories.py $VAL > "$whole"
}
