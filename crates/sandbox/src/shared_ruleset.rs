//! The command ruleset a run's sandboxed commands share: built once (the carving lists the
//! folders above each hole, opens every granted path and adds its rule) and handed to every
//! command, until a folder the carving listed has changed (a new entry there would get no
//! rule) or enough commands have added their own `/proc/<pid>` rule to it.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::SandboxError;
use super::fs_rules::{Access, FsScope, grants, list_dir};
use super::ruleset::{self, TcpAllow};

/// Commands one ruleset serves. Each adds a read rule for its own `/proc/<pid>` to it before
/// entering it, so a later command could read the `/proc/<pid>` folders of up to this many
/// earlier ones of the run (never tollgate's or anyone else's); a rebuild starts clean.
pub const COMMANDS_PER_RULESET: u32 = 32;

/// A folder modified this recently when the ruleset was built may change again within the
/// same tick of a coarse file-system clock, unseen: such a ruleset serves one command only.
const RACY_SECONDS: i64 = 2;

/// What a listed folder looked like: an entry made, removed or renamed in it changes its
/// modification time; a folder replaced by another changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(Stamp {
        inode: metadata.ino(),
        modified: (metadata.mtime(), metadata.mtime_nsec()),
        changed: (metadata.ctime(), metadata.ctime_nsec()),
    })
}

#[derive(Debug)]
struct Built {
    /// `None` where the kernel has no Landlock.
    ruleset: Option<Arc<OwnedFd>>,
    /// The folders the carving listed, as they were when it did.
    listed: Vec<(PathBuf, Option<Stamp>)>,
    served: u32,
    /// A listed folder was modified within [`RACY_SECONDS`] of the build.
    racy: bool,
}

/// The run's ruleset and how to build it again.
#[derive(Debug)]
pub struct SharedRuleset {
    abi: u32,
    scope: FsScope,
    tcp: Option<TcpAllow>,
    built: Mutex<Option<Built>>,
}

impl SharedRuleset {
    /// Builds the first ruleset now, so the first command does not wait for it.
    pub fn new(
        abi: u32,
        scope: FsScope,
        tcp: Option<TcpAllow>,
    ) -> Result<SharedRuleset, SandboxError> {
        let shared = SharedRuleset {
            abi,
            scope,
            tcp,
            built: Mutex::new(None),
        };
        let first = shared.build()?;
        *shared.built.lock().unwrap_or_else(PoisonError::into_inner) = Some(first);
        Ok(shared)
    }

    /// The ruleset for the next command: the shared one, or a new one when it went stale.
    pub fn for_command(&self) -> Result<Option<Arc<OwnedFd>>, SandboxError> {
        self.current(true)
    }

    /// The ruleset a file tool's thread enters (`tool_thread`): the same as a command's,
    /// rebuilt when stale as for one, without taking a command's share of it (a tool's thread
    /// adds no `/proc/<pid>` rule). A folder changed within the clock tick of its listing is
    /// not seen by the stamps; a new entry there then lacks a grant, which refuses, never
    /// widens, so a tool reuses such a ruleset rather than rebuild it for every call.
    pub fn for_tools(&self) -> Result<Option<Arc<OwnedFd>>, SandboxError> {
        self.current(false)
    }

    fn current(&self, command: bool) -> Result<Option<Arc<OwnedFd>>, SandboxError> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        let stale = built.as_ref().is_none_or(|built| {
            (command && (built.served >= COMMANDS_PER_RULESET || (built.racy && built.served > 0)))
                || built.listed.iter().any(|(path, was)| stamp(path) != *was)
        });
        if stale {
            *built = Some(self.build()?);
        }
        let Some(built) = built.as_mut() else {
            return Ok(None);
        };
        if command {
            built.served += 1;
        }
        Ok(built.ruleset.clone())
    }

    fn build(&self) -> Result<Built, SandboxError> {
        let grants = grants(&self.scope, &list_dir);
        // Stamped before the ruleset is built from the listing: a change in between shows as
        // a stale stamp next time, never as a fresh one.
        let listed: Vec<(PathBuf, Option<Stamp>)> = grants
            .iter()
            .filter(|grant| grant.access == Access::ListOnly)
            .map(|grant| (grant.path.clone(), stamp(&grant.path)))
            .collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(i64::MAX, |since| {
                i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
            });
        let racy = listed.iter().any(|(_, stamp)| {
            stamp.is_some_and(|stamp| now.saturating_sub(stamp.modified.0) < RACY_SECONDS)
        });
        let ruleset = ruleset::build(self.abi, &grants, self.tcp.as_ref())?.map(Arc::new);
        Ok(Built {
            ruleset,
            listed,
            served: 0,
            racy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_skip::need_landlock;

    fn scope(root: &Path) -> FsScope {
        FsScope {
            read_roots: vec![root.to_path_buf()],
            write_roots: Vec::new(),
            deny_read: vec![root.join("hidden")],
            deny_write: Vec::new(),
        }
    }

    fn same(a: &Option<Arc<OwnedFd>>, b: &Option<Arc<OwnedFd>>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Sets `dir`'s modification time an hour back (its change time becomes now).
    fn backdate(dir: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as libc::time_t;
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: now - 3600,
                tv_nsec: 0,
            },
        ];
        // SAFETY (test): utimensat(2) on a NUL-terminated path with two timespecs we own.
        assert_eq!(
            unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) },
            0
        );
    }

    #[test]
    fn one_ruleset_serves_commands_until_a_listed_folder_changes_or_its_share_is_used() {
        if !need_landlock(ruleset::kernel_abi(), 3, "a shared ruleset") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("hidden")).unwrap();
        std::fs::create_dir(root.join("open")).unwrap();
        backdate(&root);
        let shared = SharedRuleset::new(ruleset::kernel_abi(), scope(&root), None).unwrap();
        let first = shared.for_command().unwrap();
        assert!(first.is_some());
        assert!(same(&first, &shared.for_command().unwrap()));
        // A new entry beside the hole needs a rule of its own.
        std::fs::write(root.join("new.txt"), "x").unwrap();
        backdate(&root);
        let rebuilt = shared.for_command().unwrap();
        assert!(!same(&first, &rebuilt));
        for _ in 1..COMMANDS_PER_RULESET {
            assert!(same(&rebuilt, &shared.for_command().unwrap()));
        }
        assert!(!same(&rebuilt, &shared.for_command().unwrap()));
    }

    #[test]
    fn a_folder_changed_just_before_the_build_gets_a_ruleset_for_one_command() {
        if !need_landlock(ruleset::kernel_abi(), 3, "a shared ruleset") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("hidden")).unwrap();
        let shared = SharedRuleset::new(ruleset::kernel_abi(), scope(&root), None).unwrap();
        let first = shared.for_command().unwrap();
        assert!(!same(&first, &shared.for_command().unwrap()));
    }
}
