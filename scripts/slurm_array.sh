#!/usr/bin/env bash
# An example SLURM job script for PersistBench's three main stages, sharded over an array:
#
#   sbatch --array=0-15 scripts/slurm_array.sh download      # each task reconstructs 1/16 of the cases
#   sbatch scripts/slurm_array.sh download-aggregate         # once: the index from every task's records
#   sbatch --array=0-15 scripts/slurm_array.sh infer
#   sbatch scripts/slurm_array.sh infer-aggregate            # once: says which cases are not predicted
#   sbatch --array=0-15 scripts/slurm_array.sh score
#   sbatch scripts/slurm_array.sh score-aggregate            # once: results.json, summary.json, ...
#
# Chain them with --dependency=afterok:JOBID. Every path below must be on a file system mounted at the same
# path on every node (docs/distributed.md). A rerun of a task skips what it finished.
#
#SBATCH --job-name=persistbench
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=04:00:00
#SBATCH --output=logs/%x-%A_%a.out
set -euo pipefail

STAGE=${1:?usage: slurm_array.sh download|infer|score[-aggregate]}
SHARED=${SHARED:-/shared/persistbench}           # dataset, runs and caches live here
RECIPES=${RECIPES:-hf://OWNER/REPO/recipes.jsonl}
MODEL=${MODEL:-reproject}                         # or my_model.py:MyModel (on the shared file system)
RUN=${RUN:-$SHARED/runs/$(basename "${MODEL%%:*}" .py)}
PERSISTBENCH=${PERSISTBENCH:-persistbench}        # e.g. $SHARED/venv/bin/persistbench

export PERSISTBENCH_CACHE=$SHARED/cache TORCH_HOME=$SHARED/cache/torch HF_HOME=$SHARED/cache/hf
SHARD=()
if [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]]; then
    SHARD=(--shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT")
fi
WORKERS=()
if [[ "${SLURM_CPUS_PER_TASK:-1}" -gt 1 ]]; then
    WORKERS=(--executor processes --workers "$SLURM_CPUS_PER_TASK")
fi

case "$STAGE" in
download)
    "$PERSISTBENCH" download --recipes "$RECIPES" --output "$SHARED/dataset" --cache "$SHARED/cache/youtube" \
        --no-progress "${SHARD[@]}" "${WORKERS[@]}" ;;
download-aggregate)
    "$PERSISTBENCH" download --recipes "$RECIPES" --output "$SHARED/dataset" --cache "$SHARED/cache/youtube" \
        --aggregate-only ;;
infer)
    "$PERSISTBENCH" infer --model "$MODEL" --dataset "$SHARED/dataset" --output "$RUN" --resume --no-progress \
        "${SHARD[@]}" "${WORKERS[@]}" ;;
infer-aggregate)
    "$PERSISTBENCH" infer --model "$MODEL" --dataset "$SHARED/dataset" --output "$RUN" --aggregate-only ;;
score)
    "$PERSISTBENCH" score --pred "$RUN" --resume --no-progress "${SHARD[@]}" "${WORKERS[@]}" ;;
score-aggregate)
    "$PERSISTBENCH" score --pred "$RUN" --aggregate-only ;;
*)
    echo "slurm_array.sh: unknown stage $STAGE (download, infer, score, each also with -aggregate)" >&2
    exit 2 ;;
esac
