//! `tollgate batch` on a real scheduler (issue 51): Slurm from Debian's packages — munged,
//! slurmctld and slurmd on this one machine, started here on ports of their own and stopped
//! after — runs `examples/batch/slurm.sh` as a four-task job array over two dozen local
//! repositories. One array task is requeued while it runs (Slurm kills it and starts it
//! again): the repositories it had finished keep their runs, none is lost, none is run twice.
//! The merge, submitted as the recipe says (a job that waits for the array), reports exactly
//! what one unsharded batch over the same repositories reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::batch::{Fleet, TASK};
use crate::support::skip::{on_path, skip};
use crate::support::{poll_until, repo_root};

/// The programs the cluster needs, and the Debian packages that bring them.
const PROGRAMS: &[(&str, &str)] = &[
    ("munged", "munge"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("sbatch", "slurm-client"),
];

/// A one-node Slurm cluster in a temp folder; its daemons end with it.
struct Slurm {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl Slurm {
    /// The cluster, idle and ready for jobs; `None` (the test skipped, saying why) where it
    /// cannot start.
    fn start() -> Option<Slurm> {
        let missing: Vec<&str> = PROGRAMS
            .iter()
            .filter(|(program, _)| on_path(program).is_none())
            .map(|(_, package)| *package)
            .collect();
        if !missing.is_empty() {
            skip(&format!(
                "Slurm is not installed (Debian: apt-get install {}; .ci/run installs it)",
                missing.join(" ")
            ));
            return None;
        }
        if unsafe { libc::geteuid() } != 0 {
            skip("Slurm's daemons are started as root here, and this test is not root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        let key: Vec<u8> = (0..1024).map(|i| (i * 7 + 13) as u8).collect();
        std::fs::write(root.join("munge.key"), key).unwrap();
        set_mode(&root.join("munge.key"), 0o600);
        let host = hostname();
        let (ctld_port, node_port) = (free_port(), free_port());
        let at = root.display().to_string();
        std::fs::write(
            root.join("slurm.conf"),
            format!(
                "ClusterName=tollgate-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={at}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={node_port}
StateSaveLocation={at}/state
SlurmdSpoolDir={at}/spool
SlurmctldPidFile={at}/slurmctld.pid
SlurmdPidFile={at}/slurmd.pid
SlurmctldLogFile={at}/log/slurmctld.log
SlurmdLogFile={at}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobRequeue=1
MinJobAge=600
NodeName=tollgate-node NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=tollgate-node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"
            ),
        )
        .unwrap();
        let mut slurm = Slurm {
            dir,
            daemons: Vec::new(),
        };
        let munge = format!("{at}/munge.sock");
        let started = [
            slurm.daemon(
                "munged",
                &[
                    "-F",
                    "-f",
                    &format!("--socket={munge}"),
                    &format!("--key-file={at}/munge.key"),
                    &format!("--log-file={at}/log/munged.log"),
                    &format!("--pid-file={at}/munged.pid"),
                    &format!("--seed-file={at}/munged.seed"),
                ],
            ),
            poll_until(Duration::from_secs(10), || {
                Path::new(&munge).exists().then_some(())
            })
            .is_some(),
            slurm.daemon("slurmctld", &["-D", "-i"]),
            slurm.daemon("slurmd", &["-D", "-N", "tollgate-node"]),
        ];
        let idle = started.iter().all(|ok| *ok)
            && poll_until(Duration::from_secs(30), || {
                let state = slurm.output("sinfo", &["-h", "-o", "%T"]);
                state.trim().starts_with("idle").then_some(())
            })
            .is_some();
        if !idle {
            let logs: String = ["munged", "slurmctld", "slurmd"]
                .iter()
                .map(|name| {
                    let log = std::fs::read_to_string(slurm.path().join(format!("log/{name}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    format!("{name}: {}", tail.join(" | "))
                })
                .collect::<Vec<_>>()
                .join("\n");
            skip(&format!(
                "Slurm did not start here (the daemons' last log lines follow)\n{logs}"
            ));
            return None;
        }
        Some(slurm)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.path().join("slurm.conf"));
        command
    }

    fn daemon(&mut self, program: &str, args: &[&str]) -> bool {
        match self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(child) => {
                self.daemons.push(child);
                true
            }
            Err(_) => false,
        }
    }

    fn output(&self, program: &str, args: &[&str]) -> String {
        let output = self.command(program).args(args).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The array task's `Restarts=` and `JobState=`, as `scontrol` shows them.
    fn task_state(&self, task: &str) -> (u32, String) {
        let shown = self.output("scontrol", &["show", "job", task]);
        let field = |name: &str| {
            shown
                .split_whitespace()
                .find_map(|word| word.strip_prefix(name))
                .unwrap_or_default()
                .to_string()
        };
        (field("Restarts=").parse().unwrap_or(0), field("JobState="))
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Slurm's daemons first, munge last: each ends on SIGTERM.
        for child in self.daemons.iter_mut().rev() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn hostname() -> String {
    let output = Command::new("hostname").arg("-s").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Each repository a batch folder holds a finished journal for: its outcome and run id.
fn finished(folder: &Path) -> BTreeMap<String, (String, Value)> {
    let Ok(entries) = std::fs::read_dir(folder.join("repos")) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let text = std::fs::read_to_string(entry.path().join("journal.json")).ok()?;
            let journal: Value = serde_json::from_str(&text).ok()?;
            let outcome = journal["outcome"].as_str()?.to_string();
            let name = entry.file_name().to_string_lossy().into_owned();
            Some((name, (outcome, journal["run"]["run_id"].clone())))
        })
        .collect()
}

/// A merged JUnit report as (testcase, failed) pairs.
fn testcases(junit: &Path) -> BTreeMap<String, bool> {
    let text = std::fs::read_to_string(junit).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    doc.descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .map(|case| {
            let name = format!(
                "{}/{}",
                case.attribute("classname").unwrap_or_default(),
                case.attribute("name").unwrap_or_default()
            );
            let failed = case
                .children()
                .any(|child| child.has_tag_name("failure") || child.has_tag_name("error"));
            (name, failed)
        })
        .collect()
}

#[test]
fn a_slurm_job_array_shards_the_batch_a_requeued_task_resumes_and_the_merge_is_one_report() {
    let Some(slurm) = Slurm::start() else {
        return;
    };
    let count = 24;
    let fleet = Fleet::new(count, &[5, 17]);
    // Each repository's check takes a moment, so a shard is still running when its task is
    // requeued.
    let slow = TASK.replace("run: grep", "run: sleep 0.4; grep");
    assert_ne!(slow, TASK);
    std::fs::write(fleet.path().join("task.yaml"), slow).unwrap();
    let script = repo_root().join("examples/batch/slurm.sh");
    let tollgate = PathBuf::from(env!("CARGO_BIN_EXE_tollgate"));
    let submit = |args: &[&str]| {
        let output = slurm
            .command("sbatch")
            .current_dir(fleet.path())
            .env("TOLLGATE", &tollgate)
            .env("TOLLGATE_TASK", "task.yaml")
            .env("TOLLGATE_REPOS", "repos.yaml")
            .env("TOLLGATE_OUT", fleet.path().join("out"))
            .env_remove("JOB_COMPLETION_INDEX")
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "sbatch {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let job = submit(&["--parsable", "--array=0-3", script.to_str().unwrap()]);
    let requeued = format!("{job}_1");
    let shard = fleet.path().join("out/shard-1");

    // Requeue the second task once it has finished two repositories and while it runs on.
    let before = poll_until(Duration::from_secs(120), || {
        let done = finished(&shard);
        (done.len() >= 2).then_some(done)
    })
    .expect("shard 2 finished no two repositories");
    assert!(
        before.len() < count / 4,
        "the shard finished before it could be requeued: {before:?}"
    );
    let requeue = slurm
        .command("scontrol")
        .args(["requeue", &requeued])
        .output()
        .unwrap();
    assert!(
        requeue.status.success(),
        "{}",
        String::from_utf8_lossy(&requeue.stderr)
    );
    // Slurm holds a requeued task back for a while once it is pending again (`BeginTime`):
    // let it start at once.
    poll_until(Duration::from_secs(60), || {
        let (restarts, state) = slurm.task_state(&requeued);
        if restarts == 0 {
            return None;
        }
        if state == "PENDING" {
            slurm
                .command("scontrol")
                .args(["update", &format!("JobId={requeued}"), "StartTime=now"])
                .output()
                .unwrap();
            return None;
        }
        (state != "COMPLETING").then_some(())
    })
    .expect("the requeued task did not start again");
    poll_until(Duration::from_secs(240), || {
        slurm
            .output("squeue", &["-h", "-j", &job])
            .trim()
            .is_empty()
            .then_some(())
    })
    .expect("the job array did not end");
    let (restarts, state) = slurm.task_state(&requeued);
    assert_eq!((restarts, state.as_str()), (1, "COMPLETED"));

    // Every repository finished in exactly one shard; the requeued shard kept the runs it had
    // finished before it was killed.
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for index in 0..4 {
        for (repo, (outcome, _)) in finished(&fleet.path().join(format!("out/shard-{index}"))) {
            assert!(
                seen.insert(repo.clone(), outcome).is_none(),
                "{repo} in two shards"
            );
        }
    }
    assert_eq!(seen.len(), count, "{seen:?}");
    for (repo, outcome) in &seen {
        let expected = if repo == "r05" || repo == "r17" {
            "failed"
        } else {
            "changed"
        };
        assert_eq!(outcome, expected, "{repo}");
    }
    let after = finished(&shard);
    for (repo, (_, run_id)) in &before {
        assert_eq!(&after[repo].1, run_id, "{repo} ran again after the requeue");
    }

    // The merge, as the recipe submits it: a job that waits for the whole array.
    let merge = format!(
        "{} report merge out/shard-0 out/shard-1 out/shard-2 out/shard-3 --out out/merged",
        tollgate.display()
    );
    submit(&[
        "--wait",
        &format!("--dependency=afterany:{job}"),
        "--wrap",
        &merge,
    ]);
    // One batch over the same repositories, unsharded (a fresh copy: the shards' branches are
    // checked out in their working copies), reports the same testcases with the same results.
    let twin = Fleet::new(count, &[5, 17]);
    let output = twin.batch("whole", &["--jobs", "2"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = crate::support::tollgate_in(twin.path())
        .args(["report", "merge", "whole", "--out", "whole-merged"])
        .output()
        .unwrap();
    assert!(merged.status.success());
    let sharded = testcases(&fleet.path().join("out/merged/junit.xml"));
    assert_eq!(sharded.len(), count);
    assert_eq!(
        sharded,
        testcases(&twin.path().join("whole-merged/junit.xml"))
    );
}
