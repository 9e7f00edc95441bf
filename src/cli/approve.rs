//! `tollgate approve RUN [CALL…|--all] [--deny CALL…] [--note TEXT]`: a person's answers to
//! a parked run's calls, appended to its `approvals.jsonl` under the operator's key. Each
//! answer binds the hash of the call as `pending.json` shows it, computed here: a person who
//! was shown an edited `pending.json` approves a call the run never parked, and the resume
//! refuses it.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::approval::{
    APPROVALS_FILE, Approval, Approver, DEFAULT_VALID_HOURS, PENDING_FILE, Pending, Ruling,
    call_hash,
};
use crate::exit::ExitCode;

/// `pending.json` lists a run's parked calls: far below this.
const MAX_RECORD_BYTES: u64 = 64 << 20;

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The parked run: its folder, or its run id under .tollgate/runs/.
    #[arg(value_name = "RUN")]
    run: PathBuf,
    /// The tool_use ids of the calls to approve (as `pending.json` lists them).
    #[arg(value_name = "CALL")]
    calls: Vec<String>,
    /// Approve every parked call that --deny does not name.
    #[arg(long, conflicts_with = "calls")]
    all: bool,
    /// Deny this call; repeatable. The model reads the denial (and --note) as its result.
    #[arg(long = "deny", value_name = "CALL")]
    deny: Vec<String>,
    /// Said with each answer: in the record, and to the model with a denial.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    /// How many hours the answers hold; a resume after that refuses them.
    #[arg(long, value_name = "HOURS", default_value_t = DEFAULT_VALID_HOURS,
          value_parser = clap::value_parser!(u32).range(1..=8760))]
    valid_for: u32,
}

pub fn approve(args: ApproveArgs) -> Result<ExitCode> {
    let folder = crate::session::resume_folder(&args.run)?;
    let pending: Pending = serde_json::from_str(&read_record(&folder.join(PENDING_FILE))?)
        .with_context(|| format!("{} does not parse", folder.join(PENDING_FILE).display()))?;
    let answers = chosen(&args, &pending)?;
    let Some(approver) = Approver::from_env() else {
        bail!(
            "cannot tell who approves: set GITHUB_ACTOR (in GitHub Actions) or USER; an answer is recorded with its approver"
        );
    };
    let state = crate::state::StateDir::open(&[])?;
    let key = Arc::new(state.key()?);
    let now = chrono::Utc::now();
    let expires_at = now + chrono::Duration::hours(i64::from(args.valid_for));
    let mut lines = Vec::new();
    for (call, ruling) in &answers {
        lines.push(Approval {
            run_id: pending.run_id.clone(),
            id: call.id.clone(),
            tool: call.tool.clone(),
            hash: call_hash(&call.tool, &call.input),
            ruling: *ruling,
            approver: approver.clone(),
            note: args.note.clone(),
            at: now,
            expires_at,
            nonce: crate::approval::nonce()?,
        });
    }
    let path = folder.join(APPROVALS_FILE);
    let existing = match std::fs::symlink_metadata(&path) {
        Ok(_) => read_record(&path)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let text = crate::approval::append(&existing, key, &lines)?;
    crate::out_dir::write_atomic(&path, text.as_bytes())?;
    let mut said = String::new();
    for (call, ruling) in &answers {
        let verb = match ruling {
            Ruling::Approve => "approved",
            Ruling::Deny => "denied",
        };
        said.push_str(&format!(
            "{verb} {} ({} {}) as {approver}\n",
            call.id,
            call.tool,
            crate::base::truncate_middle(&call.input.to_string(), 200)
        ));
    }
    said.push_str(&format!(
        "recorded in {}; go on with: tollgate run --resume {}\n",
        path.display(),
        folder.display()
    ));
    super::print_out(&said);
    Ok(ExitCode::Success)
}

/// Each parked call named, with its answer. A name `pending.json` does not list, a call
/// both approved and denied, or no answer at all is a usage error.
fn chosen<'p>(
    args: &ApproveArgs,
    pending: &'p Pending,
) -> Result<Vec<(&'p crate::approval::ParkedCall, Ruling)>> {
    let listed: BTreeSet<&str> = pending.calls.iter().map(|call| call.id.as_str()).collect();
    for id in args.calls.iter().chain(&args.deny) {
        if !listed.contains(id.as_str()) {
            let known: Vec<&str> = listed.iter().copied().collect();
            bail!(
                "the run parked no call {id}; its parked calls: {}",
                known.join(", ")
            );
        }
    }
    if let Some(both) = args.calls.iter().find(|id| args.deny.contains(id)) {
        bail!("{both} is named to be approved and denied: give it one answer");
    }
    let answers: Vec<_> = pending
        .calls
        .iter()
        .filter_map(|call| {
            if args.deny.contains(&call.id) {
                Some((call, Ruling::Deny))
            } else if args.all || args.calls.contains(&call.id) {
                Some((call, Ruling::Approve))
            } else {
                None
            }
        })
        .collect();
    if answers.is_empty() {
        bail!("name the calls to approve (or --all) or to deny (--deny CALL)");
    }
    Ok(answers)
}

/// A file of the run folder, read whole within its cap and never through a link.
fn read_record(path: &Path) -> Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pending() -> Pending {
        let call = |id: &str| crate::approval::ParkedCall {
            id: id.into(),
            tool: "Bash".into(),
            input: json!({"command": id}),
            hash: String::new(),
            step: crate::policy::Step::ContentAsk,
            layer: crate::policy::Layer::Rule,
            rule: None,
            reason: "r".into(),
            would: crate::approval::Would::default(),
        };
        Pending {
            run_id: "run".into(),
            calls: vec![call("a"), call("b"), call("c")],
        }
    }

    fn args(calls: &[&str], all: bool, deny: &[&str]) -> ApproveArgs {
        ApproveArgs {
            run: PathBuf::from("run"),
            calls: calls.iter().map(|id| id.to_string()).collect(),
            all,
            deny: deny.iter().map(|id| id.to_string()).collect(),
            note: None,
            valid_for: 1,
        }
    }

    #[test]
    fn each_named_call_gets_one_answer() {
        let pending = pending();
        let said = |args: &ApproveArgs| -> Result<Vec<(String, Ruling)>> {
            Ok(chosen(args, &pending)?
                .into_iter()
                .map(|(call, ruling)| (call.id.clone(), ruling))
                .collect())
        };
        assert_eq!(
            said(&args(&["a"], false, &["c"])).unwrap(),
            [("a".into(), Ruling::Approve), ("c".into(), Ruling::Deny)]
        );
        assert_eq!(
            said(&args(&[], true, &["b"])).unwrap(),
            [
                ("a".into(), Ruling::Approve),
                ("b".into(), Ruling::Deny),
                ("c".into(), Ruling::Approve)
            ]
        );
        let error = |args: &ApproveArgs| said(args).unwrap_err().to_string();
        assert!(error(&args(&["x"], false, &[])).contains("parked no call x"));
        assert!(error(&args(&["a"], false, &["a"])).contains("approved and denied"));
        assert!(error(&args(&[], false, &[])).contains("name the calls"));
    }
}
