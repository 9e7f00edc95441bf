#!/bin/sh
# Slurm job array: the array's K-th task (counting from 1, whatever indices --array gives)
# takes shard K of SLURM_ARRAY_TASK_COUNT, writing into its own folder on storage every node
# reaches. Submit it, then the merge once every task ended:
#   job=$(sbatch --parsable --array=0-3 examples/batch/slurm.sh)
#   sbatch --dependency=afterany:$job --wrap 'tollgate report merge "$TOLLGATE_OUT"/shard-* --out "$TOLLGATE_OUT"/merged'
# A task preempted, cancelled with `scontrol requeue` or lost with its node starts again in
# the same folder and resumes from its journals: repositories already finished are kept,
# the one cut short runs again. tests/suite/slurm.rs submits this very file to a one-node
# Slurm it starts, requeues a task mid-run and merges the shards.
#SBATCH --job-name=tollgate-batch
#SBATCH --requeue
#SBATCH --output=tollgate-batch-%A_%a.log
# TOLLGATE_TASK and TOLLGATE_REPOS name the task and the manifest, TOLLGATE_OUT the folder
# the shards write under (sbatch passes the submitting shell's environment on).
set -eu
task="${TOLLGATE_TASK:-task.yaml}"
repos="${TOLLGATE_REPOS:-repos.txt}"
out="${TOLLGATE_OUT:-batch}"
shard="$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1))/$SLURM_ARRAY_TASK_COUNT"
# Exit 1 means the batch ran and some repositories failed (the reports say which): the task
# succeeded. Anything else (a configuration error, a kill) fails it.
"${TOLLGATE:-tollgate}" batch "$task" --repos "$repos" --jobs 2 --shard "$shard" \
  --out "$out/shard-$SLURM_ARRAY_TASK_ID" || [ $? -eq 1 ]
