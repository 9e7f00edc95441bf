//! The account tollgate runs as. `run --run-as USER` moves the whole process — the gate, the
//! file tools, every command, hook and MCP server it starts — to an unprivileged account
//! before anything else happens, so what the model does can reach only what that account may:
//! not the runner's home, its tool caches, the job's other files, nor root through `sudo`.
//!
//! Three ways in, chosen by what the process is: already the account (a re-exec through
//! `sudo` landed here) — only harden; root — drop in place (supplementary groups to the
//! account's primary group alone, then gid, then uid, each real, effective and saved, and a
//! check that root cannot be regained); anyone else — re-exec through `sudo -n -u USER` when
//! the account may be reached so (a GitHub-hosted runner's user may), else refuse. Every way
//! ends with `no_new_privs` (no set-uid program, `sudo` among them, raises anything again)
//! and the process not dumpable (a command of the same account cannot attach to tollgate or
//! read its memory, where the provider's key lives).

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Set on the re-exec through `sudo`: the process it starts must already be the account, so
/// a second re-exec (a `sudo` that did not change the user) is refused instead of looping.
const REEXEC_MARK: &str = "TOLLGATE_RUN_AS_REEXEC";

/// The invoker's PATH across the re-exec: sudo's `secure_path` replaces PATH even with
/// `--preserve-env`, and the toolchains a job set up (its `GITHUB_PATH` entries) would be gone.
const PATH_CARRIED: &str = "TOLLGATE_RUN_AS_PATH";

/// An account as the user database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub home: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum RunAsError {
    #[error("--run-as {0}: no such user on this machine")]
    NoSuchUser(String),
    #[error("--run-as {0}: the name is not one the user database holds")]
    BadName(String),
    #[error("--run-as {0}: the user database cannot be read: {1}")]
    Lookup(String, std::io::Error),
    #[error("--run-as {0}: that account is root (uid 0), not an unprivileged user")]
    Root(String),
    #[error(
        "--run-as {user}: tollgate runs as uid {uid}, which can neither change user itself \
         (that needs root) nor reach {user} through `sudo -n` ({why}); run tollgate as root \
         or allow `sudo -u {user}` without a password"
    )]
    CannotReach { user: String, uid: u32, why: String },
    #[error("--run-as {user}: {step} failed: {source}")]
    Drop {
        user: String,
        step: &'static str,
        source: std::io::Error,
    },
    #[error(
        "--run-as {user}: after the change the process still holds uid {uid} or gid {gid}, \
         or could become root again"
    )]
    Incomplete { user: String, uid: u32, gid: u32 },
    #[error(
        "--run-as {user}: {} would not apply to {user} (it is this account's own \
         configuration); move its rules into the managed policy (--policy or /etc/tollgate), \
         which binds every account",
        path.display()
    )]
    LeftBehind { user: String, path: PathBuf },
    #[error("--run-as {user}: the re-exec through sudo did not make this process {user}")]
    ReexecLanded { user: String },
    #[error("--run-as {user}: cannot start tollgate again through sudo: {source}")]
    Reexec {
        user: String,
        source: std::io::Error,
    },
}

/// The account named `name`.
pub fn lookup(name: &str) -> Result<Account, RunAsError> {
    let c_name = CString::new(name).map_err(|_| RunAsError::BadName(name.to_string()))?;
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    loop {
        // SAFETY: `passwd` is plain data that getpwnam_r fills; `buffer` outlives every use of
        // the pointers it stores there (they are copied out below before `buffer` changes).
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let status = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        if status == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 4, 0);
            continue;
        }
        if status != 0 {
            return Err(RunAsError::Lookup(
                name.to_string(),
                std::io::Error::from_raw_os_error(status),
            ));
        }
        if found.is_null() {
            return Err(RunAsError::NoSuchUser(name.to_string()));
        }
        // SAFETY: getpwnam_r succeeded and `found` points at `entry`, whose pw_dir is a
        // NUL-terminated string inside `buffer`, alive here.
        let home = unsafe { CStr::from_ptr(entry.pw_dir) };
        return Ok(Account {
            name: name.to_string(),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
            home: PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes())),
        });
    }
}

/// Makes this process `name`. Must run while the process has one thread (the CLI calls it
/// right after parsing its arguments): it rewrites the environment and, as root, changes the
/// credentials every later thread inherits. Returns only as `name`; a re-exec through `sudo`
/// does not return at all.
///
/// `left_behind` names the invoking account's own configuration (its user policy) that the
/// new account would not read: one that exists is refused before anything changes, so no
/// rule of the operator's stops applying unsaid.
pub fn become_user(name: &str, left_behind: &[PathBuf]) -> Result<Account, RunAsError> {
    let account = lookup(name)?;
    if account.uid == 0 {
        return Err(RunAsError::Root(account.name));
    }
    let (ruid, euid, suid) = current_uids();
    if ruid == account.uid && euid == account.uid && suid == account.uid {
        if std::env::var_os(REEXEC_MARK).is_some()
            && let Some(path) = std::env::var_os(PATH_CARRIED)
        {
            // SAFETY: one thread (documented precondition).
            unsafe { std::env::set_var("PATH", path) };
        }
        harden(&account)?;
        return Ok(account);
    }
    if std::env::var_os(REEXEC_MARK).is_some() {
        return Err(RunAsError::ReexecLanded { user: account.name });
    }
    if let Some(path) = left_behind.iter().find(|path| path.exists()) {
        return Err(RunAsError::LeftBehind {
            user: account.name,
            path: path.clone(),
        });
    }
    if euid == 0 {
        drop_to(&account)?;
        harden(&account)?;
        return Ok(account);
    }
    Err(reexec_through_sudo(&account, euid))
}

fn current_uids() -> (libc::uid_t, libc::uid_t, libc::uid_t) {
    let (mut ruid, mut euid, mut suid) = (0, 0, 0);
    // SAFETY: getresuid writes three integers through valid pointers; it cannot fail so.
    unsafe { libc::getresuid(&mut ruid, &mut euid, &mut suid) };
    (ruid, euid, suid)
}

fn current_gids() -> (libc::gid_t, libc::gid_t, libc::gid_t) {
    let (mut rgid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: as for getresuid.
    unsafe { libc::getresgid(&mut rgid, &mut egid, &mut sgid) };
    (rgid, egid, sgid)
}

fn step(account: &Account, step: &'static str, status: libc::c_int) -> Result<(), RunAsError> {
    if status == 0 {
        return Ok(());
    }
    Err(RunAsError::Drop {
        user: account.name.clone(),
        step,
        source: std::io::Error::last_os_error(),
    })
}

/// Root to `account`, in the order that leaves no way back: groups and gid while still root
/// (after setuid they could not be changed), uid last.
fn drop_to(account: &Account) -> Result<(), RunAsError> {
    let groups = [account.gid];
    // SAFETY: each call takes integers, or a pointer to `groups` with its length.
    step(account, "setgroups", unsafe {
        libc::setgroups(groups.len(), groups.as_ptr())
    })?;
    step(account, "setresgid", unsafe {
        libc::setresgid(account.gid, account.gid, account.gid)
    })?;
    step(account, "setresuid", unsafe {
        libc::setresuid(account.uid, account.uid, account.uid)
    })?;
    let (ruid, euid, suid) = current_uids();
    let (rgid, egid, sgid) = current_gids();
    // SAFETY: setuid(0) takes an integer; it must fail now, and if it did not the process is
    // root again, which the check below refuses.
    let regained = unsafe { libc::setuid(0) } == 0;
    if regained
        || [ruid, euid, suid].iter().any(|&uid| uid != account.uid)
        || [rgid, egid, sgid].iter().any(|&gid| gid != account.gid)
    {
        return Err(RunAsError::Incomplete {
            user: account.name.clone(),
            uid: euid,
            gid: egid,
        });
    }
    Ok(())
}

/// What every way in ends with: no privilege to be gained by exec, no attaching to tollgate,
/// and the account's own home and names in the environment the commands inherit. The XDG
/// folders named for the invoking account go too: the new one's are under its home.
fn harden(account: &Account) -> Result<(), RunAsError> {
    // SAFETY: prctl with integer arguments only.
    step(account, "prctl(PR_SET_NO_NEW_PRIVS)", unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    })?;
    step(account, "prctl(PR_SET_DUMPABLE)", unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0)
    })?;
    // SAFETY: the process has one thread (documented precondition of `become_user`).
    unsafe {
        std::env::set_var("HOME", &account.home);
        std::env::set_var("USER", &account.name);
        std::env::set_var("LOGNAME", &account.name);
        for name in [
            "XDG_CONFIG_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR",
            REEXEC_MARK,
            PATH_CARRIED,
        ] {
            std::env::remove_var(name);
        }
    }
    Ok(())
}

/// Starts this same command again as `account` through `sudo -n`, after checking that sudo
/// will do it without a password and that the account may run this binary; returns only the
/// reason it cannot.
fn reexec_through_sudo(account: &Account, uid: libc::uid_t) -> RunAsError {
    let cannot = |why: String| RunAsError::CannotReach {
        user: account.name.clone(),
        uid,
        why,
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => return cannot(format!("cannot name tollgate's own binary: {err}")),
    };
    let probe = Command::new("sudo")
        .args(["-n", "-u", &account.name, "--"])
        .arg(&exe)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(err) => return cannot(format!("`sudo` cannot start: {err}")),
        Ok(out) if !out.status.success() => {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = said.lines().last().unwrap_or("").trim();
            return cannot(format!(
                "`sudo -n -u {} -- {} --version` failed{}",
                account.name,
                exe.display(),
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ));
        }
        Ok(_) => {}
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let err = Command::new("sudo")
        .args(["-n", "--preserve-env", "-u", &account.name, "--"])
        .arg(&exe)
        .args(args)
        .env(REEXEC_MARK, "1")
        .env(PATH_CARRIED, std::env::var_os("PATH").unwrap_or_default())
        .exec();
    RunAsError::Reexec {
        user: account.name.clone(),
        source: err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_and_refused_as_a_target() {
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(matches!(become_user("root", &[]), Err(RunAsError::Root(_))));
    }

    #[test]
    fn an_unknown_or_malformed_name_is_a_clear_error() {
        assert!(matches!(
            lookup("no-such-user-tollgate-test"),
            Err(RunAsError::NoSuchUser(_))
        ));
        assert!(matches!(lookup("a\0b"), Err(RunAsError::BadName(_))));
        let message = become_user("no-such-user-tollgate-test", &[])
            .unwrap_err()
            .to_string();
        assert!(message.contains("no such user"), "{message}");
    }
}
