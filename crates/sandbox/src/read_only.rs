//! The read-only domain: a Bash command that nothing but the analyser's read-only proof
//! allowed runs where the kernel holds it to that proof. It may write nothing but
//! `/dev/null`-like devices, its pipes and the run's TMPDIR, change no file's mode, owner,
//! timestamps or extended attributes, open no socket that can name a peer, and connect or
//! bind no TCP port; a wrong read-only verdict then cannot write,
//! delete, rename or connect. Built once per run and shared by its commands; on by default,
//! with or without the policy's sandbox (`sandbox.read_only_commands: off` turns it off).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::child::ChildSetup;
use super::fs_rules::WRITABLE_DEVICES;
use super::seccomp::SyscallFilter;
use super::{MAX_ABI_ENV, SandboxError, io, ruleset};
pub use tollgate_policy::settings::ReadOnlyCommands;

/// Whether read-only verdicts are enforced by the kernel in this run: in `run_started`
/// (stream-json `init`), the step summary and the printed summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOnlyStatus {
    pub enforced: bool,
    /// 0 when the kernel has no Landlock.
    pub landlock_abi: u32,
    /// TCP connect and bind refused by Landlock too (ABI 4), besides the socket filter.
    pub tcp_rules: bool,
    /// Why it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ReadOnlyStatus {
    /// One line for people.
    pub fn describe(&self) -> String {
        match &self.reason {
            None => format!(
                "kernel-enforced (Landlock ABI {}: no writes but devices and TMPDIR; no sockets but pairs{})",
                self.landlock_abi,
                if self.tcp_rules { "; no TCP" } else { "" }
            ),
            Some(reason) => format!("NOT enforced: {reason}"),
        }
    }
}

/// What the kernel offers for `setting` (the Landlock ABI capped by `TOLLGATE_SANDBOX_MAX_ABI`,
/// as for the sandbox). Below ABI 3 a read-only verdict is the analyser's word alone.
pub fn preflight(setting: ReadOnlyCommands) -> ReadOnlyStatus {
    let cap = std::env::var(MAX_ABI_ENV)
        .ok()
        .and_then(|value| value.trim().parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    preflight_with(setting, super::kernel_abi().min(cap))
}

fn preflight_with(setting: ReadOnlyCommands, abi: u32) -> ReadOnlyStatus {
    let reason = match setting {
        ReadOnlyCommands::Off => Some("sandbox.read_only_commands is off".to_string()),
        ReadOnlyCommands::Enforce if abi < 3 => Some(format!(
            "needs Landlock ABI 3 (Linux 6.2), the kernel offers {abi}"
        )),
        ReadOnlyCommands::Enforce => None,
    };
    ReadOnlyStatus {
        enforced: reason.is_none(),
        landlock_abi: abi,
        tcp_rules: reason.is_none() && abi >= 4,
        reason,
    }
}

/// The run's read-only domain, ready to be entered by any number of commands.
#[derive(Debug)]
pub struct ReadOnlyDomain {
    ruleset: Arc<OwnedFd>,
    filter: Arc<SyscallFilter>,
    tmpdir: PathBuf,
    /// Made for this domain (no sandbox gave one): removed with it.
    own_tmpdir: bool,
}

impl ReadOnlyDomain {
    /// Builds the domain when `status` says it is enforced. `tmpdir` is the sandbox's when
    /// one runs (both domains must let the command write there); otherwise a folder of its
    /// own is made for the run.
    pub fn start(
        status: &ReadOnlyStatus,
        sandbox_tmpdir: Option<&Path>,
        run_id: &str,
    ) -> Result<Option<ReadOnlyDomain>, SandboxError> {
        if !status.enforced {
            return Ok(None);
        }
        let (tmpdir, own_tmpdir) = match sandbox_tmpdir {
            Some(dir) => (dir.to_path_buf(), false),
            None => {
                let dir = std::env::temp_dir().join(format!("tollgate-{run_id}-read-only"));
                std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
                (dir, true)
            }
        };
        let mut writable: Vec<&Path> = WRITABLE_DEVICES.iter().map(Path::new).collect();
        writable.push(&tmpdir);
        let Some(ruleset) = ruleset::build_read_only(status.landlock_abi, &writable)? else {
            return Ok(None);
        };
        Ok(Some(ReadOnlyDomain {
            ruleset: Arc::new(ruleset),
            filter: Arc::new(SyscallFilter::read_only()?),
            tmpdir,
            own_tmpdir,
        }))
    }

    /// The command's TMPDIR.
    pub fn tmpdir(&self) -> &Path {
        &self.tmpdir
    }

    /// Stacks this domain on `setup` (a sandboxed command's), replacing its socket filter
    /// by the stricter one.
    pub fn confine(&self, setup: &mut ChildSetup) {
        setup.read_only = Some(self.ruleset.clone());
        setup.filter = Some(self.filter.clone());
    }

    /// What a command outside any sandbox applies to enter the domain.
    pub fn setup(&self) -> ChildSetup {
        let mut setup = ChildSetup {
            cgroup_procs: None,
            rlimits: Vec::new(),
            ruleset: None,
            own_proc_rights: 0,
            read_only: None,
            filter: None,
        };
        self.confine(&mut setup);
        setup
    }
}

impl Drop for ReadOnlyDomain {
    fn drop(&mut self) {
        if self.own_tmpdir
            && let Err(err) = std::fs::remove_dir_all(&self.tmpdir)
        {
            tracing::debug!("cannot remove {}: {err}", self.tmpdir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforced_from_abi_3_unless_turned_off() {
        let table = [
            (ReadOnlyCommands::Enforce, 7, true, true),
            (ReadOnlyCommands::Enforce, 3, true, false),
            (ReadOnlyCommands::Enforce, 2, false, false),
            (ReadOnlyCommands::Off, 7, false, false),
        ];
        for (setting, abi, enforced, tcp) in table {
            let status = preflight_with(setting, abi);
            assert_eq!(
                (status.enforced, status.tcp_rules),
                (enforced, tcp),
                "{abi}"
            );
            assert_eq!(status.reason.is_none(), enforced);
            assert!(status.describe().contains("enforced"));
        }
    }
}
