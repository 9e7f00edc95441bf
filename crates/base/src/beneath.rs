//! Acting on files beneath a root folder, with the kernel doing the resolution: a [`Root`] is
//! an open directory descriptor, and every path given to it is relative and reached from that
//! descriptor by `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`. Owns opening, creating, stat-ing, making folders, renaming and
//! removing below a root; it never decides *whether* a path may be touched (the gate does).
//!
//! Why no link at all, not only none leading out: the callers pass a path the gate already
//! resolved (every link in it followed, by this crate's and the tools' resolver) and
//! judged. Telling the kernel to follow none means what is opened is exactly the name that
//! was judged: a link that appears between the judgement and the open (a component swapped,
//! a dangling link committed where a file was expected, `/proc/self/root` behind a name)
//! fails the open with `ELOOP` instead of being followed somewhere else. Files are opened
//! with `O_NOFOLLOW` and created with `O_CREAT | O_EXCL` where the caller needs to know it
//! made the file, so the last component is never a link either.
//!
//! On a kernel without `openat2` (before Linux 5.6, or a seccomp profile that refuses it) the
//! same rule is kept by walking the path one component at a time, each opened relative to
//! the last with `O_NOFOLLOW` and checked to be a folder: slower (a system call per
//! component), never weaker.

use std::ffi::{CStr, CString, OsStr};
use std::fs::{File, Metadata};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an act beneath a root did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// The relative path names something outside the root (`..`, an absolute path), or the
    /// kernel found it would leave it.
    #[error("{} is not below {}", path.display(), root.display())]
    Outside { root: PathBuf, path: PathBuf },
    /// A component of the path (or its last one) is a symbolic link.
    #[error(
        "{} is reached through a symbolic link; file tools act only on the path the gate judged, never through a link",
        path.display()
    )]
    Link { path: PathBuf },
    /// Anything else the system said; the path is the full one, for the message.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl BeneathError {
    /// The operating system's error number, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            BeneathError::Io { source, .. } => source.raw_os_error(),
            BeneathError::Outside { .. } => Some(libc::EXDEV),
            BeneathError::Link { .. } => Some(libc::ELOOP),
        }
    }

    /// As an I/O error, for callers whose errors are those: the system's own where there is
    /// one, else this error's sentence.
    pub fn into_io(self) -> std::io::Error {
        match self {
            BeneathError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        }
    }

    /// Whether the path (or a folder on its way) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.raw_os_error() == Some(libc::ENOENT)
    }
}

/// What a file is opened for. Every mode adds `O_CLOEXEC`, `O_NOFOLLOW`, `O_NOCTTY` and
/// `O_NONBLOCK` (a FIFO or a device swapped in never makes the open wait; what was opened is
/// checked with `fstat` by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFor {
    /// `O_PATH`: to `fstat` what is there, nothing else.
    Look,
    Read,
    /// Read and write an existing file, not truncated.
    ReadWrite,
    /// Write an existing file, not truncated.
    Write,
    /// Create a file that must not exist yet (`O_CREAT | O_EXCL`).
    CreateNew,
    /// Create or empty a file (`O_CREAT | O_TRUNC`).
    Replace,
    /// Append to an existing file.
    Append,
    /// Read and write a file, created when missing, never truncated (a lock file).
    Lock,
}

impl OpenFor {
    fn flags(self) -> libc::c_int {
        let common = libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NOCTTY;
        match self {
            // O_PATH ignores every flag but O_CLOEXEC, O_DIRECTORY and O_NOFOLLOW.
            OpenFor::Look => libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            OpenFor::Read => common | libc::O_NONBLOCK | libc::O_RDONLY,
            OpenFor::ReadWrite => common | libc::O_NONBLOCK | libc::O_RDWR,
            OpenFor::Write => common | libc::O_NONBLOCK | libc::O_WRONLY,
            OpenFor::CreateNew => {
                common | libc::O_NONBLOCK | libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL
            }
            OpenFor::Replace => {
                common | libc::O_NONBLOCK | libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
            }
            OpenFor::Append => common | libc::O_NONBLOCK | libc::O_WRONLY | libc::O_APPEND,
            OpenFor::Lock => common | libc::O_NONBLOCK | libc::O_RDWR | libc::O_CREAT,
        }
    }

    fn creates(self) -> bool {
        matches!(self, OpenFor::CreateNew | OpenFor::Replace | OpenFor::Lock)
    }

    fn verb(self) -> &'static str {
        match self {
            OpenFor::Look => "look at",
            OpenFor::Read => "read",
            OpenFor::ReadWrite | OpenFor::Write | OpenFor::Append | OpenFor::Lock => "write",
            OpenFor::CreateNew | OpenFor::Replace => "create",
        }
    }
}

/// A folder every act is beneath: its descriptor (`O_PATH`) and the path it was opened at,
/// for messages.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    /// How this kernel opens beneath a descriptor (decided once per process).
    resolver: Resolver,
    path: PathBuf,
}

impl Root {
    /// Opens the folder at `path` as a root. `path` is the caller's own (a canonical workspace
    /// root, the run's output folder): links in it are followed, magic links are not.
    pub fn open(path: &Path) -> Result<Root, BeneathError> {
        let fail = |source| BeneathError::Io {
            what: "open the folder",
            path: path.to_path_buf(),
            source,
        };
        let name = c_path(path.as_os_str()).map_err(fail)?;
        // SAFETY: open(2) reads the NUL-terminated path; the result is checked below.
        let raw = unsafe {
            libc::open(
                name.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a descriptor open(2) just returned to us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Root {
            fd,
            resolver: resolver(),
            path: path.to_path_buf(),
        })
    }

    /// The path the root was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` joined to the root's path, as messages name it.
    pub fn shown(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.path.clone()
        } else {
            self.path.join(rel)
        }
    }

    /// Opens the file `rel` (relative, no `..`) for `purpose`; no link is followed anywhere.
    pub fn open_file(&self, rel: &Path, purpose: OpenFor) -> Result<File, BeneathError> {
        let mode = if purpose.creates() { 0o666 } else { 0 };
        let fd = self.open_fd(rel, purpose.flags(), mode, purpose.verb())?;
        Ok(File::from(fd))
    }

    /// What `rel` is (its `fstat`), the path itself not followed if it is a link — which is
    /// then refused, as everything reached through one.
    pub fn metadata(&self, rel: &Path) -> Result<Metadata, BeneathError> {
        let file = self.open_file(rel, OpenFor::Look)?;
        let metadata = file.metadata().map_err(|source| BeneathError::Io {
            what: "look at",
            path: self.shown(rel),
            source,
        })?;
        if metadata.file_type().is_symlink() {
            return Err(BeneathError::Link {
                path: self.shown(rel),
            });
        }
        Ok(metadata)
    }

    /// Makes the folder `rel` and each missing one on its way, beneath the root; an existing
    /// link on the way is refused, never followed.
    pub fn create_dirs(&self, rel: &Path) -> Result<(), BeneathError> {
        let names = names(&self.path, rel)?;
        let mut current: Option<OwnedFd> = None;
        let mut walked = PathBuf::new();
        for name in names {
            walked.push(name);
            let parent = current.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
            let c_name = c_path(name).map_err(|source| self.io("create", &walked, source))?;
            let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
            let opened = match open_beneath(self.resolver, parent, &c_name, dir_flags, 0) {
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                    // SAFETY: mkdirat(2) reads the NUL-terminated name relative to a descriptor
                    // we hold; it follows no link in the last component.
                    let made = unsafe { libc::mkdirat(parent.as_raw_fd(), c_name.as_ptr(), 0o777) };
                    if made != 0 {
                        let err = std::io::Error::last_os_error();
                        if err.raw_os_error() != Some(libc::EEXIST) {
                            return Err(self.io("create the folder", &walked, err));
                        }
                    }
                    open_beneath(self.resolver, parent, &c_name, dir_flags, 0)
                }
                other => other,
            };
            let fd = opened.map_err(|err| {
                // A link where a folder belongs opens as a non-folder: name it as the link.
                if err.raw_os_error() == Some(libc::ENOTDIR)
                    && matches!(self.metadata(&walked), Err(BeneathError::Link { .. }))
                {
                    return BeneathError::Link {
                        path: self.shown(&walked),
                    };
                }
                self.classify("create the folder", &walked, err)
            })?;
            current = Some(fd);
        }
        Ok(())
    }

    /// Writes `bytes` to `rel` whole or not at all: a temp file created (never followed)
    /// beside it, written, then renamed over it with `renameat`, which replaces a link at
    /// `rel` rather than writing through it. The folder must exist.
    pub fn write_atomic(&self, rel: &Path, bytes: &[u8]) -> Result<(), BeneathError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let (dir, name) = self.parent_of(rel)?;
        let name_text = name.to_string_lossy();
        let temp_name = format!(
            ".{name_text}.{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let temp_rel = rel.with_file_name(&temp_name);
        let c_temp = c_path(OsStr::new(&temp_name))
            .map_err(|source| self.io("create", &temp_rel, source))?;
        let c_name = c_path(name).map_err(|source| self.io("write", rel, source))?;
        let flags = OpenFor::CreateNew.flags() & !libc::O_NONBLOCK;
        let fd = open_beneath(self.resolver, dir.as_fd(), &c_temp, flags, 0o666)
            .map_err(|err| self.classify("create", &temp_rel, err))?;
        let mut file = File::from(fd);
        let written = file.write_all(bytes).and_then(|()| {
            // SAFETY: renameat(2) reads two NUL-terminated names relative to a descriptor we
            // hold; neither name is followed if it is a link.
            let renamed = unsafe {
                libc::renameat(
                    dir.as_raw_fd(),
                    c_temp.as_ptr(),
                    dir.as_raw_fd(),
                    c_name.as_ptr(),
                )
            };
            if renamed == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
        if let Err(source) = written {
            // SAFETY: unlinkat(2) of our own temp name relative to a descriptor we hold.
            unsafe { libc::unlinkat(dir.as_raw_fd(), c_temp.as_ptr(), 0) };
            return Err(self.io("write", rel, source));
        }
        Ok(())
    }

    /// Renames `from` to `to`, both beneath the root; neither last component is followed.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), BeneathError> {
        let (from_dir, from_name) = self.parent_of(from)?;
        let (to_dir, to_name) = self.parent_of(to)?;
        let c_from = c_path(from_name).map_err(|source| self.io("rename", from, source))?;
        let c_to = c_path(to_name).map_err(|source| self.io("rename", to, source))?;
        // SAFETY: renameat(2) reads two NUL-terminated names relative to descriptors we hold.
        let renamed = unsafe {
            libc::renameat(
                from_dir.as_raw_fd(),
                c_from.as_ptr(),
                to_dir.as_raw_fd(),
                c_to.as_ptr(),
            )
        };
        if renamed != 0 {
            return Err(self.io("rename", from, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Removes the file `rel` (a link there is removed itself, never followed).
    pub fn remove_file(&self, rel: &Path) -> Result<(), BeneathError> {
        let (dir, name) = self.parent_of(rel)?;
        let c_name = c_path(name).map_err(|source| self.io("remove", rel, source))?;
        // SAFETY: unlinkat(2) of a NUL-terminated name relative to a descriptor we hold.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), 0) } != 0 {
            return Err(self.io("remove", rel, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The folder holding `rel` (opened beneath the root) and `rel`'s last name.
    fn parent_of<'r>(&self, rel: &'r Path) -> Result<(OwnedFd, &'r OsStr), BeneathError> {
        let all = names(&self.path, rel)?;
        let Some((last, _)) = all.split_last() else {
            return Err(BeneathError::Outside {
                root: self.path.clone(),
                path: self.shown(rel),
            });
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = self.open_fd(
            parent,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
            "open the folder",
        )?;
        Ok((dir, last))
    }

    fn open_fd(
        &self,
        rel: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
        what: &'static str,
    ) -> Result<OwnedFd, BeneathError> {
        names(&self.path, rel)?;
        let relative = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let c_rel = c_path(relative.as_os_str()).map_err(|source| self.io(what, rel, source))?;
        open_beneath(self.resolver, self.fd.as_fd(), &c_rel, flags, mode)
            .map_err(|err| self.classify(what, rel, err))
    }

    fn io(&self, what: &'static str, rel: &Path, source: std::io::Error) -> BeneathError {
        BeneathError::Io {
            what,
            path: self.shown(rel),
            source,
        }
    }

    /// An open's error as what it means here: a link met (`ELOOP`), an escape (`EXDEV`).
    fn classify(&self, what: &'static str, rel: &Path, err: std::io::Error) -> BeneathError {
        match err.raw_os_error() {
            Some(libc::ELOOP) => BeneathError::Link {
                path: self.shown(rel),
            },
            Some(libc::EXDEV) => BeneathError::Outside {
                root: self.path.clone(),
                path: self.shown(rel),
            },
            _ => self.io(what, rel, err),
        }
    }
}

/// `rel`'s names, if it is relative and has no `..` (`.` parts are dropped).
fn names<'r>(root: &Path, rel: &'r Path) -> Result<Vec<&'r OsStr>, BeneathError> {
    let mut out = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(BeneathError::Outside {
                    root: root.to_path_buf(),
                    path: root.join(rel),
                });
            }
        }
    }
    Ok(out)
}

fn c_path(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path holds a NUL byte",
        )
    })
}

/// How this kernel opens beneath a descriptor: decided once, by a harmless `openat2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolver {
    Openat2,
    /// No `openat2` here: component by component with `O_NOFOLLOW`.
    Walk,
}

fn resolver() -> Resolver {
    static FOUND: OnceLock<Resolver> = OnceLock::new();
    *FOUND.get_or_init(|| {
        if std::env::var_os(WALK_ENV).is_some_and(|value| value == "1") {
            return Resolver::Walk;
        }
        let root = c"/";
        match openat2(None, root, libc::O_PATH | libc::O_CLOEXEC, 0, 0) {
            Ok(_) => Resolver::Openat2,
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                Resolver::Walk
            }
            // Anything else (a descriptor limit, say) says the call exists.
            Err(_) => Resolver::Openat2,
        }
    })
}

/// `1` makes every open beneath a root take the component walk, as on a kernel without
/// `openat2`: how the tests and the benches see that path on a kernel that has it.
pub const WALK_ENV: &str = "TOLLGATE_BENEATH_WALK";

/// Opens `name` (relative) beneath `dir`, following no link and never leaving `dir`.
fn open_beneath(
    resolver: Resolver,
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    match resolver {
        Resolver::Openat2 => {
            let resolve =
                libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
            openat2(Some(dir), name, flags, mode, resolve)
        }
        Resolver::Walk => walk(dir, name, flags, mode),
    }
}

/// `struct open_how` as the kernel reads it (libc's is marked non-exhaustive, so it cannot be
/// built here): three 64-bit fields, 24 bytes, the size passed beside it.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(2)`, retried where the kernel asks for it (`EAGAIN` after a concurrent rename
/// and `EINTR`).
fn openat2(
    dir: Option<BorrowedFd<'_>>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
    resolve: u64,
) -> std::io::Result<OwnedFd> {
    let how = OpenHow {
        flags: u64::from(flags.cast_unsigned()),
        mode: u64::from(mode),
        resolve,
    };
    let dir = dir.map_or(libc::AT_FDCWD, |dir| dir.as_raw_fd());
    for _ in 0..16 {
        // SAFETY: openat2(2) reads the NUL-terminated name and the `open_how` we own, whose
        // size we pass; it returns a new descriptor or -1.
        let raw = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                name.as_ptr(),
                &raw const how,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if raw >= 0 {
            let raw = libc::c_int::try_from(raw)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
            // SAFETY: `raw` is a descriptor openat2(2) just returned to us alone.
            return Ok(unsafe { OwnedFd::from_raw_fd(raw) });
        }
        let err = std::io::Error::last_os_error();
        if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return Err(err);
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EAGAIN))
}

/// The walk a kernel without `openat2` gets: each folder on the way opened relative to the
/// last with `O_PATH | O_NOFOLLOW` and checked with `fstat` to be a folder (a link opened
/// that way is the link itself, and refused); the last name opened with `O_NOFOLLOW`.
fn walk(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    let bytes = name.to_bytes();
    let parts: Vec<&[u8]> = bytes
        .split(|&b| b == b'/')
        .filter(|part| !part.is_empty() && *part != b".")
        .collect();
    if bytes.first() == Some(&b'/') || parts.iter().any(|part| *part == b"..") {
        return Err(std::io::Error::from_raw_os_error(libc::EXDEV));
    }
    let Some((last, folders)) = parts.split_last() else {
        // The root itself.
        return at(dir, c".", flags | libc::O_NOFOLLOW, mode);
    };
    let mut current: Option<OwnedFd> = None;
    for folder in folders {
        let c_folder =
            CString::new(*folder).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let parent = current.as_ref().map_or(dir, AsFd::as_fd);
        let fd = at(
            parent,
            &c_folder,
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
        )?;
        let kind = File::from(fd.try_clone()?).metadata()?.file_type();
        if kind.is_symlink() {
            return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
        }
        if !kind.is_dir() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        current = Some(fd);
    }
    let c_last =
        CString::new(*last).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let parent = current.as_ref().map_or(dir, AsFd::as_fd);
    let fd = at(parent, &c_last, flags | libc::O_NOFOLLOW, mode)?;
    // O_PATH | O_NOFOLLOW opens a link as itself instead of failing: refuse it as openat2 does.
    if flags & libc::O_PATH != 0 && File::from(fd.try_clone()?).metadata()?.is_symlink() {
        return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok(fd)
}

/// `openat(2)`.
fn at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    // SAFETY: openat(2) reads the NUL-terminated name relative to a descriptor we hold.
    let raw = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor openat(2) just returned to us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::fs::symlink;

    use super::*;

    /// A root `ws/` with `src/real.txt`, and `outside/` beside it holding `secret.txt`.
    struct Scene {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        outside: PathBuf,
    }

    fn scene() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws.join("src/real.txt"), "INSIDE").unwrap();
        std::fs::write(outside.join("secret.txt"), "OUTSIDE").unwrap();
        Scene {
            _dir: dir,
            ws,
            outside,
        }
    }

    /// The root at `path` with each way this kernel has of resolving beneath it.
    fn roots(path: &Path) -> Vec<Root> {
        [Resolver::Openat2, Resolver::Walk]
            .into_iter()
            .filter(|how| *how == Resolver::Walk || resolver() == Resolver::Openat2)
            .map(|how| Root {
                resolver: how,
                ..Root::open(path).unwrap()
            })
            .collect()
    }

    fn read(root: &Root, rel: &str) -> Result<String, BeneathError> {
        let mut text = String::new();
        root.open_file(Path::new(rel), OpenFor::Read)?
            .read_to_string(&mut text)
            .unwrap();
        Ok(text)
    }

    #[test]
    fn a_dangling_link_is_never_followed_to_create_its_target() {
        let scene = scene();
        let target = scene.outside.join("created.txt");
        symlink(&target, scene.ws.join("src/dang")).unwrap();
        symlink("../../outside/relative.txt", scene.ws.join("src/rel")).unwrap();
        symlink(scene.outside.join("newdir"), scene.ws.join("src/dir")).unwrap();
        for root in roots(&scene.ws) {
            for link in ["src/dang", "src/rel"] {
                let rel = Path::new(link);
                let made = root.open_file(rel, OpenFor::CreateNew).unwrap_err();
                assert_eq!(made.raw_os_error(), Some(libc::EEXIST), "{link}: {made}");
                for how in [
                    OpenFor::Write,
                    OpenFor::Replace,
                    OpenFor::Append,
                    OpenFor::Lock,
                ] {
                    let err = root.open_file(rel, how).unwrap_err();
                    assert!(
                        matches!(err, BeneathError::Link { .. }),
                        "{link} {how:?}: {err}"
                    );
                }
                assert!(matches!(root.metadata(rel), Err(BeneathError::Link { .. })));
            }
            let err = root.create_dirs(Path::new("src/dir/deeper")).unwrap_err();
            assert!(matches!(err, BeneathError::Link { .. }), "{err}");
            let err = root
                .open_file(Path::new("src/dir/file.txt"), OpenFor::CreateNew)
                .unwrap_err();
            assert!(matches!(err, BeneathError::Link { .. }), "{err}");
            // An atomic write replaces the link itself and never writes through it.
            root.write_atomic(Path::new("src/dang"), b"x").unwrap();
            assert!(
                !std::fs::symlink_metadata(scene.ws.join("src/dang"))
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
            std::fs::remove_file(scene.ws.join("src/dang")).unwrap();
            symlink(&target, scene.ws.join("src/dang")).unwrap();
        }
        assert_eq!(std::fs::read_dir(&scene.outside).unwrap().count(), 1);
    }

    #[test]
    fn links_out_chains_and_dot_dot_are_refused_and_plain_paths_open() {
        let scene = scene();
        let src = scene.ws.join("src");
        symlink(scene.outside.join("secret.txt"), src.join("secret")).unwrap();
        symlink(&scene.outside, src.join("odir")).unwrap();
        symlink("c2", src.join("c1")).unwrap();
        symlink("real.txt", src.join("c2")).unwrap();
        symlink(".", src.join("self")).unwrap();
        for root in roots(&scene.ws) {
            assert_eq!(read(&root, "src/real.txt").unwrap(), "INSIDE");
            assert_eq!(read(&root, "./src/./real.txt").unwrap(), "INSIDE");
            for linked in [
                "src/secret",
                "src/odir/secret.txt",
                "src/c1",
                "src/self/real.txt",
            ] {
                let err = read(&root, linked).unwrap_err();
                assert!(matches!(err, BeneathError::Link { .. }), "{linked}: {err}");
                assert!(err.to_string().contains("through a symbolic link"), "{err}");
            }
            for escape in ["../outside/secret.txt", "src/../../outside/secret.txt"] {
                let err = read(&root, escape).unwrap_err();
                assert!(
                    matches!(err, BeneathError::Outside { .. }),
                    "{escape}: {err}"
                );
            }
            let absolute = scene.outside.join("secret.txt");
            let err = read(&root, &absolute.display().to_string()).unwrap_err();
            assert!(matches!(err, BeneathError::Outside { .. }), "{err}");
            // The kernel itself refuses a `..` that leaves the root, whoever asks.
            let escaped = open_beneath(
                root.resolver,
                root.fd.as_fd(),
                c"../outside/secret.txt",
                libc::O_RDONLY | libc::O_CLOEXEC,
                0,
            )
            .unwrap_err();
            assert_eq!(escaped.raw_os_error(), Some(libc::EXDEV), "{escaped}");
            assert!(root.metadata(Path::new("")).unwrap().is_dir());
            assert!(root.metadata(Path::new("src/real.txt")).unwrap().is_file());
        }
    }

    #[test]
    fn magic_links_are_refused_behind_a_name_and_in_proc_itself() {
        let scene = scene();
        symlink("/proc/self/root", scene.ws.join("src/proc")).unwrap();
        symlink("/proc/self/cwd", scene.ws.join("src/cwd")).unwrap();
        for root in roots(&scene.ws) {
            for through in ["src/proc/etc/hostname", "src/cwd/Cargo.toml", "src/proc"] {
                let err = read(&root, through).unwrap_err();
                assert!(matches!(err, BeneathError::Link { .. }), "{through}: {err}");
            }
        }
        // Beneath /proc/self itself, `root` and `cwd` are magic links: not followed either.
        for root in roots(Path::new("/proc/self")) {
            for magic in ["root/etc/hostname", "cwd", "fd/0"] {
                let err = read(&root, magic).unwrap_err();
                assert!(matches!(err, BeneathError::Link { .. }), "{magic}: {err}");
            }
        }
    }

    #[test]
    fn folders_are_made_files_renamed_and_removed_beneath_the_root() {
        let scene = scene();
        for root in roots(&scene.ws) {
            root.create_dirs(Path::new("a/b/c")).unwrap();
            root.create_dirs(Path::new("a/b/c")).unwrap();
            root.write_atomic(Path::new("a/b/c/f.txt"), b"one").unwrap();
            root.write_atomic(Path::new("a/b/c/f.txt"), b"two").unwrap();
            assert_eq!(read(&root, "a/b/c/f.txt").unwrap(), "two");
            root.rename(Path::new("a/b/c/f.txt"), Path::new("a/g.txt"))
                .unwrap();
            assert_eq!(read(&root, "a/g.txt").unwrap(), "two");
            root.remove_file(Path::new("a/g.txt")).unwrap();
            assert!(
                root.metadata(Path::new("a/g.txt"))
                    .unwrap_err()
                    .is_not_found()
            );
            // No temp file is left behind, and a file where a folder belongs refuses.
            let names: Vec<_> = std::fs::read_dir(scene.ws.join("a/b/c")).unwrap().collect();
            assert!(names.is_empty(), "{names:?}");
            std::fs::remove_dir_all(scene.ws.join("a")).unwrap();
            let err = root.create_dirs(Path::new("src/real.txt/x")).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");
        }
    }

    /// A component swapped for a link between any check and the open: the open fails or
    /// reaches the file inside, and never the one the link leads to.
    #[test]
    fn a_component_swapped_for_a_link_fails_closed() {
        let scene = scene();
        std::fs::create_dir(scene.ws.join("dir")).unwrap();
        std::fs::write(scene.ws.join("dir/file"), "INSIDE").unwrap();
        std::fs::write(scene.outside.join("file"), "OUTSIDE").unwrap();
        symlink(&scene.outside, scene.ws.join("alt")).unwrap();
        let (a, b) = (
            CString::new(scene.ws.join("dir").as_os_str().as_bytes()).unwrap(),
            CString::new(scene.ws.join("alt").as_os_str().as_bytes()).unwrap(),
        );
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut swaps = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: renameat2(2) exchanging two NUL-terminated paths we own.
                    let done = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
                    swaps += 1;
                }
                swaps
            })
        };
        let (mut inside, mut refused) = (0u32, 0u32);
        for root in roots(&scene.ws) {
            for _ in 0..5_000 {
                match read(&root, "dir/file") {
                    Ok(text) => {
                        assert_eq!(text, "INSIDE");
                        inside += 1;
                    }
                    Err(BeneathError::Link { .. }) => refused += 1,
                    Err(err) => panic!("an open ended otherwise: {err}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(
            swaps > 0 && inside > 0,
            "{swaps} swaps, {inside} opens inside"
        );
        eprintln!("{swaps} swaps: {inside} opens inside, {refused} refused");
    }
}
