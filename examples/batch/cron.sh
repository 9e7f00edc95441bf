#!/bin/sh
# Nightly from cron (crontab: `0 2 * * * /opt/tollgate/cron.sh`): the same batch folder each
# night, so a night cut short resumes, and `--rerun changed` re-runs only repositories whose
# head commit, task, policy or model changed since their last run.
# In the container image (Containerfile; README "Install"), the same script from cron:
#   0 2 * * * podman run --rm --env ANTHROPIC_API_KEY -v /opt/tollgate:/opt/tollgate
#     -v /var/lib/tollgate:/var/lib/tollgate --entrypoint /opt/tollgate/cron.sh
#     ghcr.io/example/tollgate:latest
# TOLLGATE_HOME holds the task and the manifest; TOLLGATE_STATE the batch folder and the
# merged report (tests/suite/batch.rs runs this script with both in a temp folder).
set -eu
home="${TOLLGATE_HOME:-/opt/tollgate}"
state="${TOLLGATE_STATE:-/var/lib/tollgate}"
cd "$home"
tollgate batch examples/batch/task.yaml --repos examples/batch/repos.txt \
  --jobs 4 --out "$state/batch" --rerun changed || status=$?
tollgate report merge "$state/batch" --out "$state/report"
exit "${status:-0}"
