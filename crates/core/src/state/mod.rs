//! tollgate's own state, kept outside every workspace: the operator's state folder
//! (`TOLLGATE_STATE_DIR`, else `$XDG_STATE_HOME/tollgate`, else `~/.local/state/tollgate`),
//! the key that signs transcripts there, and the record of the run folders tollgate created
//! for each workdir (what `--continue` goes on with). Nothing a repository holds is read as
//! tollgate's state: a transcript is trusted only with a tag this key made ([`seal`]), and a
//! run folder only when this folder recorded it.

pub mod seal;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use seal::{
    APPROVALS_GENESIS, Chain, TranscriptKey, Verified, VerifyError, verify, verify_record,
};

/// Moves the state folder (CI, a test): an absolute path.
pub const STATE_DIR_ENV: &str = "TOLLGATE_STATE_DIR";
/// The key's file in the state folder.
const KEY_FILE: &str = "transcript.key";
/// The folder of `--continue`'s records: one file per workdir.
const RUNS_DIR: &str = "runs";
/// The folder of approvals a resume has used: one empty file per approval's nonce.
const USED_APPROVALS_DIR: &str = "approvals-used";
const KEY_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "tollgate has no state folder: set {STATE_DIR_ENV} (an absolute path), XDG_STATE_HOME or HOME"
    )]
    Unknown,
    #[error("{STATE_DIR_ENV} must be an absolute path, not {}", .0.display())]
    Relative(PathBuf),
    #[error("cannot use tollgate's state folder {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "tollgate's state folder {} {why}; it holds the key that signs transcripts",
        path.display()
    )]
    Unsafe { path: PathBuf, why: String },
}

/// Where the state folder is, from the environment (not created, not checked). `None`
/// when no variable names one.
pub fn locate() -> Result<PathBuf, StateError> {
    if let Some(dir) = std::env::var_os(STATE_DIR_ENV).filter(|dir| !dir.is_empty()) {
        let dir = PathBuf::from(dir);
        if !dir.is_absolute() {
            return Err(StateError::Relative(dir));
        }
        return Ok(dir);
    }
    // The XDG spec ignores a relative XDG_STATE_HOME.
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
    {
        return Ok(dir.join("tollgate"));
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.join(".local/state/tollgate"))
        .ok_or(StateError::Unknown)
}

/// The state folder as the gate guards it: resolved once per process (the environment does
/// not change), canonical where it exists. Reading or writing anything below it is refused
/// to the model's tools and commands in every mode.
pub fn guarded() -> Option<&'static Path> {
    static GUARDED: OnceLock<Option<PathBuf>> = OnceLock::new();
    GUARDED
        .get_or_init(|| {
            let dir = locate().ok()?;
            Some(canonical_or_lexical(&dir))
        })
        .as_deref()
}

/// [`guarded`] owned, for the workspace the gate is handed ([`crate::policy::Workspace::with_state_folder`]).
pub fn guarded_folder() -> Option<PathBuf> {
    guarded().map(Path::to_path_buf)
}

/// `path` with its symlinks resolved as far as it exists, the rest appended.
fn canonical_or_lexical(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            return missing
                .iter()
                .rev()
                .fold(real, |path: PathBuf, name: &OsString| path.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return crate::base::normalize_lexically(path),
        }
    }
}

/// The operator's state folder, created (0700) and checked: a real folder of this user
/// that no one else can write.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// The folder [`locate`] names, created if missing. Refused when it lies inside one of
    /// `workdirs` (a repository could bring its own key there) or others may write it.
    pub fn open(workdirs: &[PathBuf]) -> Result<StateDir, StateError> {
        let path = locate()?;
        StateDir::open_at(&path, workdirs)
    }

    pub fn open_at(path: &Path, workdirs: &[PathBuf]) -> Result<StateDir, StateError> {
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(io)?;
        let real = path.canonicalize().map_err(io)?;
        let unsafe_because = |why: &str| StateError::Unsafe {
            path: real.clone(),
            why: why.to_string(),
        };
        if workdirs.iter().any(|root| real.starts_with(root)) {
            return Err(unsafe_because(
                "is inside the workdir, where a repository could bring its own key",
            ));
        }
        let meta = std::fs::metadata(&real).map_err(io)?;
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        if meta.uid() != uid {
            return Err(unsafe_because("belongs to another user"));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unsafe_because(
                "can be written by others (chmod go-w it, or 0700)",
            ));
        }
        Ok(StateDir { path: real })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The transcript key, made (32 random bytes, 0600) on first use. Two runs starting at
    /// once agree on one key: each writes a file of its own and links it into place, and the
    /// one that loses reads the winner's.
    pub fn key(&self) -> Result<TranscriptKey, StateError> {
        let path = self.path.join(KEY_FILE);
        match read_key(&path) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => {}
            Err(err) => return Err(err),
        }
        // The key, and a name of its own for the file it is written to first: runs (or
        // threads) starting at once must not share that file.
        let mut bytes = [0u8; KEY_BYTES];
        let mut name = [0u8; 8];
        let random = ring::rand::SystemRandom::new();
        ring::rand::SecureRandom::fill(&random, &mut bytes)
            .and_then(|()| ring::rand::SecureRandom::fill(&random, &mut name))
            .map_err(|_| StateError::Io {
                path: path.clone(),
                source: std::io::Error::other("the system's random source failed"),
            })?;
        let temp = self
            .path
            .join(format!(".{KEY_FILE}.{}.tmp", seal::hex(&name)));
        let io = |source| StateError::Io {
            path: path.clone(),
            source,
        };
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)
            .and_then(|mut file| file.write_all(&bytes).and_then(|()| file.sync_all()));
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(err));
        }
        let linked = std::fs::hard_link(&temp, &path);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => Ok(TranscriptKey::new(&bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => read_key(&path)?
                .ok_or_else(|| io(std::io::Error::other("the key vanished while it was made"))),
            Err(err) => Err(io(err)),
        }
    }

    /// Records `folder` as the latest run tollgate created (or resumed) for `workdir`.
    pub fn record_run(&self, workdir: &Path, folder: &Path) -> Result<(), StateError> {
        let dir = self.path.join(RUNS_DIR);
        let io = |source| StateError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        let path = dir.join(record_name(workdir));
        let temp = dir.join(format!(
            ".{}.{}.tmp",
            record_name(workdir),
            std::process::id()
        ));
        let mut text = folder.as_os_str().as_bytes().to_vec();
        text.push(b'\n');
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)
            .and_then(|mut file| file.write_all(&text))
            .and_then(|()| std::fs::rename(&temp, &path));
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(err));
        }
        Ok(())
    }

    /// Whether the approval with this nonce was used by a resume before.
    pub fn approval_used(&self, nonce: &str) -> bool {
        is_nonce(nonce)
            && self
                .path
                .join(USED_APPROVALS_DIR)
                .join(nonce)
                .symlink_metadata()
                .is_ok()
    }

    /// Marks the approval with this nonce used; `Ok(false)` when a resume used it first.
    /// Kept here, beside the key, because a copy of the run folder (a re-run CI job's
    /// artifact) carries the approval again: only the operator's state remembers its use.
    pub fn use_approval(&self, nonce: &str) -> Result<bool, StateError> {
        let dir = self.path.join(USED_APPROVALS_DIR);
        let io = |source| StateError::Io {
            path: dir.clone(),
            source,
        };
        if !is_nonce(nonce) {
            return Err(io(std::io::Error::other(format!(
                "`{nonce}` is not an approval's nonce"
            ))));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(nonce))
        {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(err) => Err(io(err)),
        }
    }

    /// The run folder last recorded for `workdir`, if any.
    pub fn latest_run(&self, workdir: &Path) -> Option<PathBuf> {
        let path = self.path.join(RUNS_DIR).join(record_name(workdir));
        let bytes = std::fs::read(path).ok()?;
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        (!line.is_empty())
            .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(line)))
            .filter(|folder| folder.is_absolute())
    }
}

/// An approval's nonce names a file: 32 lowercase hex digits and nothing else.
fn is_nonce(nonce: &str) -> bool {
    nonce.len() == 32
        && nonce
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A workdir's record file: the SHA-256 of its path, so any path makes one plain name.
fn record_name(workdir: &Path) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, workdir.as_os_str().as_bytes());
    seal::hex(digest.as_ref())
}

/// The key in `path`, `None` when there is none yet. A key file that is a link, another
/// user's, readable by others or of the wrong size is refused, never replaced.
fn read_key(path: &Path) -> Result<Option<TranscriptKey>, StateError> {
    let unsafe_because = |why: &str| StateError::Unsafe {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Err(unsafe_because("is a symbolic link"));
        }
        Err(source) => {
            return Err(StateError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let meta = file.metadata().map_err(|source| StateError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(unsafe_because(
            "is not a regular file of this user readable by no one else (0600)",
        ));
    }
    let mut bytes = Vec::with_capacity(KEY_BYTES);
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&file, KEY_BYTES as u64 + 1),
        &mut bytes,
    )
    .map_err(|source| StateError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.len() != KEY_BYTES {
        return Err(unsafe_because("does not hold a 32-byte key"));
    }
    Ok(Some(TranscriptKey::new(&bytes)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_key_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_at(&dir.path().join("s/tollgate"), &[]).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!(mode(state.path()), 0o700);
        let first = state.key().unwrap();
        assert_eq!(mode(&state.path().join(KEY_FILE)), 0o600);
        let again = state.key().unwrap();
        let mut chain = Chain::start(std::sync::Arc::new(first));
        let line = chain.seal("{\"seq\":1}");
        assert!(verify(Some(&again), &format!("{line}\n")).is_ok());
        // Racing starts agree on one key.
        let fresh = StateDir::open_at(&dir.path().join("race"), &[]).unwrap();
        let keys: Vec<TranscriptKey> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| fresh.key().unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut chain = Chain::start(std::sync::Arc::new(keys[0].clone()));
        let line = format!("{}\n", chain.seal("{\"seq\":1}"));
        assert!(keys.iter().all(|key| verify(Some(key), &line).is_ok()));
    }

    #[test]
    fn an_unsafe_state_folder_or_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let inside = StateDir::open_at(&ws.join(".state"), std::slice::from_ref(&ws));
        assert!(
            matches!(inside, Err(StateError::Unsafe { .. })),
            "{inside:?}"
        );
        let open = root.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            StateDir::open_at(&open, &[]),
            Err(StateError::Unsafe { .. })
        ));
        let state = StateDir::open_at(&root.join("s"), &[]).unwrap();
        std::fs::write(root.join("elsewhere"), [7u8; 32]).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), state.path().join(KEY_FILE)).unwrap();
        let err = state.key().unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    #[test]
    fn runs_are_recorded_per_workdir() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_at(&dir.path().join("s"), &[]).unwrap();
        assert_eq!(state.latest_run(Path::new("/w/a")), None);
        state
            .record_run(Path::new("/w/a"), Path::new("/w/a/.tollgate/runs/1"))
            .unwrap();
        state
            .record_run(Path::new("/w/b"), Path::new("/w/b/.tollgate/runs/2"))
            .unwrap();
        state
            .record_run(Path::new("/w/a"), Path::new("/w/a/.tollgate/runs/3"))
            .unwrap();
        assert_eq!(
            state.latest_run(Path::new("/w/a")),
            Some(PathBuf::from("/w/a/.tollgate/runs/3"))
        );
        assert_eq!(
            state.latest_run(Path::new("/w/b")),
            Some(PathBuf::from("/w/b/.tollgate/runs/2"))
        );
    }
}
