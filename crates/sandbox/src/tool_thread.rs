//! The thread in-process tools do their filesystem work on while the sandbox runs. Read,
//! Write, Edit, Glob and Grep act in tollgate's own process, where Landlock does not reach a
//! command's child; so each call's work runs on a fresh thread that first restricts itself
//! (`landlock_restrict_self`) with the very ruleset the run's commands get, then works, then
//! ends. A file tool can therefore write (and read) nothing a sandboxed command could not,
//! whatever the path resolution above it got wrong: the kernel decides on the object.
//!
//! Landlock binds a thread, not a process: the domain reaches this thread (and any it would
//! start) and no other of tollgate's, and the thread ends with the call, so no confined
//! thread is ever reused for tollgate's own work (the transcript, the reports). Entering a
//! domain needs `no_new_privs`, which is per thread too.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::SandboxError;

/// Runs `work` on a new thread confined by `ruleset`, and returns what it returned. `Err`
/// when the thread could not be started or confined (the work then never ran) or ended
/// without an answer (it panicked).
pub async fn run_confined<T, F>(ruleset: Arc<OwnedFd>, work: F) -> Result<T, SandboxError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("tollgate-tool-fs".into())
        .spawn(move || {
            let outcome = confine(&ruleset).map(|()| work());
            // The caller gone (its call was cancelled) leaves no one to tell.
            let _ = answer.send(outcome);
        })
        .map_err(|source| SandboxError::Io {
            what: "start the confined file-tool thread".into(),
            source,
        })?;
    match answered.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(SandboxError::Io {
            what: "confine the file-tool thread with the sandbox's Landlock ruleset".into(),
            source,
        }),
        Err(_) => Err(SandboxError::Io {
            what: "finish the file tool's work".into(),
            source: std::io::Error::other("the confined thread ended without an answer"),
        }),
    }
}

/// Puts the calling thread, and only it, in `ruleset`'s domain.
fn confine(ruleset: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only and sets the calling
    // thread's flag; Landlock refuses an unprivileged thread without it.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: landlock_restrict_self(2) takes a ruleset descriptor we hold and flags 0; it
    // restricts the calling thread.
    let done =
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::fs_rules::FsScope;
    use super::super::ruleset;
    use super::super::shared_ruleset::SharedRuleset;
    use super::*;

    /// The domain binds the one thread: there a write outside the write roots is refused
    /// while a read of them works; tollgate's other threads, this one included, still write.
    #[tokio::test]
    async fn the_domain_confines_the_work_thread_and_no_other() {
        let abi = ruleset::kernel_abi();
        if abi < 3 {
            return eprintln!("tool_thread: skipped: no Landlock ABI 3 on this kernel");
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("readable"), "yes").unwrap();
        let scope = FsScope {
            read_roots: vec![PathBuf::from("/")],
            write_roots: vec![ws.clone()],
            deny_read: vec![],
            deny_write: vec![],
        };
        let shared = SharedRuleset::new(abi, scope, None).unwrap();
        let ruleset = shared.for_tools().unwrap().unwrap();
        let (inside, beyond) = (ws.join("a.txt"), outside.join("b.txt"));
        let attempt = {
            let (inside, beyond, readable) =
                (inside.clone(), beyond.clone(), outside.join("readable"));
            move || {
                (
                    std::fs::write(&inside, "in").is_ok(),
                    std::fs::write(&beyond, "out").map_err(|err| err.kind()),
                    std::fs::read_to_string(readable).ok(),
                )
            }
        };
        let (wrote_inside, wrote_beyond, read) = run_confined(ruleset, attempt).await.unwrap();
        assert!(wrote_inside);
        assert_eq!(wrote_beyond, Err(std::io::ErrorKind::PermissionDenied));
        assert_eq!(read.as_deref(), Some("yes"));
        assert!(!beyond.exists());
        std::fs::write(&beyond, "from the unconfined thread").unwrap();
        let spawned = std::thread::spawn(move || std::fs::write(Path::new(&beyond), "again"));
        assert!(spawned.join().unwrap().is_ok());
    }
}
