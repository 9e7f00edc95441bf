//! `tollgate verify RUN`: checks a run folder's transcript against its `statement.json`
//! (and, with the operator's key, every line's tag) and says what differs. Exit 0 when
//! nothing does, 1 when something does.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::attest::{STATEMENT_FILE, Statement};
use crate::exit::ExitCode;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The run: its folder, or its run id under .tollgate/runs/.
    #[arg(value_name = "RUN")]
    run: PathBuf,
}

pub fn verify(args: VerifyArgs) -> Result<ExitCode> {
    let folder = crate::session::resume_folder(&args.run)?;
    let statement_path = folder.join(STATEMENT_FILE);
    let statement: Statement = serde_json::from_str(
        &std::fs::read_to_string(&statement_path)
            .with_context(|| format!("cannot read {}", statement_path.display()))?,
    )
    .with_context(|| format!("{} is not an in-toto statement", statement_path.display()))?;
    let transcript_path = folder.join(crate::out_dir::TRANSCRIPT_FILE);
    let transcript = std::fs::read_to_string(&transcript_path)
        .with_context(|| format!("cannot read {}", transcript_path.display()))?;
    // The tags are checked where the operator's key is at hand; elsewhere the digest the
    // signed statement names still tells a changed transcript.
    let key = crate::state::StateDir::open(&[])
        .and_then(|state| state.key())
        .ok();
    let differs = crate::attest::verify(&statement, &transcript, key.as_ref());
    let tags = if key.is_some() {
        "and every line's integrity tag"
    } else {
        "(no transcript key here: the lines' tags were not checked)"
    };
    if differs.is_empty() {
        super::print_out(&format!(
            "verified: {} matches {} {tags}\n",
            transcript_path.display(),
            statement_path.display()
        ));
        return Ok(ExitCode::Success);
    }
    let mut said = format!(
        "{} differs from {}:\n",
        transcript_path.display(),
        statement_path.display()
    );
    for difference in differs {
        said.push_str(&format!("- {difference}\n"));
    }
    super::print_out(&said);
    Ok(ExitCode::TaskFailed)
}
