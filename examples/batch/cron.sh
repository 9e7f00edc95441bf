#!/bin/sh
# Nightly from cron (crontab: `0 2 * * * /opt/tollgate/cron.sh`): the same batch folder each
# night, so a night cut short resumes, and `--rerun changed` re-runs only repositories whose
# head commit, task, policy or model changed since their last run.
set -eu
cd /opt/tollgate
tollgate batch examples/batch/task.yaml --repos examples/batch/repos.txt \
  --jobs 4 --out /var/lib/tollgate/batch --rerun changed || status=$?
tollgate report merge /var/lib/tollgate/batch --out /var/lib/tollgate/report
exit "${status:-0}"
