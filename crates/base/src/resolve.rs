//! Where a path leads when a given process opens it: the object the kernel's lookup reaches,
//! which is what the gate must judge (not the name as written, nor that name looked up in
//! tollgate's own process). One resolver for Bash commands and the in-process file tools.
//!
//! The walk is the kernel's, component by component from the process's working directory
//! (or `/`): each name is looked up with `lstat`; a symbolic link is read (`readlink`) and its
//! target walked in its place, relative to the link's folder, dangling or not, so that a link
//! to something that does not exist yet leads to where a write through it would create the
//! file; `..` is taken on the folder reached so far, links resolved (`link/..` is the parent
//! of the link's target); more than [`MAX_LINKS`] links in one lookup is a loop, refused as
//! the kernel refuses it (`ELOOP`). A part that does not exist is kept as written, and the
//! walk looks again after a `..` brings it back to a folder that exists (a command may create
//! the missing folder before it uses the path).
//!
//! The names of a process's own files (`/proc/self`, `/proc/thread-self`, `/proc/<pid>`,
//! `/dev/fd`, `/dev/std{in,out,err}`) are never looked up: in tollgate's process they would
//! name tollgate's files (its working directory, its open log). For a command
//! ([`Frame::Command`]) `…/cwd` is the command's working directory, `…/root` is `/`, and
//! descriptors 0–2 are its standard streams; every other such name, and every such name in
//! tollgate's own frame ([`Frame::Tool`]), is reached as a [`Reached::ProcessFile`], which the
//! guardrails refuse.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::disk::{DiskView, Seen, look_now};

/// Links one lookup may follow: Linux's `MAXSYMLINKS`. One more is a loop.
pub const MAX_LINKS: usize = 40;

/// Whose process a path is looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A command tollgate starts, working in `cwd` (after any `cd`; `None` when that is not
    /// known): relative paths and `/proc/self/cwd` start there, and its descriptors 0–2 are
    /// its own standard streams.
    Command { cwd: Option<&'a Path> },
    /// tollgate's own process (the file tools run in it): every name of a process's own files
    /// is a [`Reached::ProcessFile`]; paths must be absolute.
    Tool,
}

/// A command's standard stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdin,
    Stdout,
    Stderr,
}

impl Stream {
    fn of(fd: &[u8]) -> Option<Stream> {
        match fd {
            b"0" => Some(Stream::Stdin),
            b"1" => Some(Stream::Stdout),
            b"2" => Some(Stream::Stderr),
            _ => None,
        }
    }

    /// The stream's name under `/dev`, as Bash spells it.
    pub fn dev_path(self) -> &'static Path {
        Path::new(match self {
            Stream::Stdin => "/dev/stdin",
            Stream::Stdout => "/dev/stdout",
            Stream::Stderr => "/dev/stderr",
        })
    }
}

/// What a lookup reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reached {
    /// A place in the file system: absolute, every link followed (dangling ones included),
    /// no `.` or `..` in the part that exists; a part that does not exist kept as written.
    Path(PathBuf),
    /// One of the command's own standard streams (`/dev/stdout`, `/dev/fd/2`,
    /// `/proc/self/fd/0`).
    Stream(Stream),
    /// A file of a process's own under `/proc` whose target cannot be known before the
    /// command runs, or that is not the command's (its memory, environment, other
    /// descriptors, `exe`; any `/proc/<pid>/…`; in tollgate's frame, all of them): named under
    /// `/proc` as it was reached (`/dev/fd/3` is `/proc/self/fd/3`), never looked up.
    ProcessFile(PathBuf),
}

impl Reached {
    /// The path the gate checks: the place, the stream's `/dev` name, or the process file.
    pub fn path(&self) -> &Path {
        match self {
            Reached::Path(path) | Reached::ProcessFile(path) => path,
            Reached::Stream(stream) => stream.dev_path(),
        }
    }

    pub fn into_path(self) -> PathBuf {
        match self {
            Reached::Path(path) | Reached::ProcessFile(path) => path,
            Reached::Stream(stream) => stream.dev_path().to_path_buf(),
        }
    }
}

/// Why a path leads nowhere the gate can name; the text is the refusal's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolvable {
    #[error("{} passes through more than {MAX_LINKS} symbolic links (a loop)", .0.display())]
    Loop(PathBuf),
    #[error("{} is relative to a working directory not known here", .0.display())]
    UnknownCwd(PathBuf),
    #[error("the symbolic link {} cannot be read", .0.display())]
    Unreadable(PathBuf),
}

/// Where `path` leads in `frame`. `canonical` are folders known to hold no link (the
/// workspace's roots, canonical from the run's start): an absolute path below one is walked
/// from there, without looking at the root's own parts. With a stream's view of the disk
/// (`disk`), names are answered from it.
pub fn resolve<P: AsRef<Path>>(
    path: &Path,
    frame: Frame<'_>,
    canonical: &[P],
    disk: Option<&DiskView>,
) -> Result<Reached, Unresolvable> {
    walk_from(path, frame, canonical, &|p: &Path| match disk {
        Some(disk) => disk.look(p),
        None => look_now(p),
    })
}

/// [`resolve`] over a disk that holds every name and no link: the walk's `..`, `/proc/self`
/// and `/dev/fd` rules alone. For analyses that must not touch the disk (proposals, tests).
pub fn resolve_without_disk(path: &Path, frame: Frame<'_>) -> Result<Reached, Unresolvable> {
    walk_from(path, frame, &[] as &[&Path], &|_: &Path| Seen::Entry)
}

fn walk_from<P: AsRef<Path>>(
    path: &Path,
    frame: Frame<'_>,
    canonical: &[P],
    look: &dyn Fn(&Path) -> Seen,
) -> Result<Reached, Unresolvable> {
    let (start, rest): (&Path, &Path) = if path.is_absolute() {
        canonical
            .iter()
            .map(AsRef::as_ref)
            .filter_map(|root| Some((root, super::strip_prefix(path, root)?)))
            .max_by_key(|(root, _)| root.as_os_str().len())
            .unwrap_or((Path::new("/"), path))
    } else {
        match frame {
            Frame::Command { cwd: Some(cwd) } => (cwd, path),
            _ => return Err(Unresolvable::UnknownCwd(path.to_path_buf())),
        }
    };
    let mut resolved = PathBuf::with_capacity(start.as_os_str().len() + 1 + rest.as_os_str().len());
    resolved.push(start);
    Walk {
        frame,
        look,
        written: path,
        resolved,
        missing: 0,
        links: 0,
    }
    .run(rest.as_os_str().as_bytes())
}

struct Walk<'w> {
    frame: Frame<'w>,
    look: &'w dyn Fn(&Path) -> Seen,
    /// The path as given, for a refusal's reason.
    written: &'w Path,
    resolved: PathBuf,
    /// How many of `resolved`'s last parts were not found (nothing below them is looked up
    /// until `..` climbs back out).
    missing: usize,
    links: usize,
}

/// A name under `/proc` or `/dev` that names a process's own files.
enum Magic {
    /// `/proc/self`, `/proc/thread-self`: the process that opens the path.
    OwnProcess,
    /// `/proc/<pid>`: some process, never known to be the command's.
    Process,
    /// `/dev/fd`: the opener's descriptors.
    Descriptors,
    /// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`.
    StandardStream(&'static [u8]),
}

impl Walk<'_> {
    fn run(mut self, rest: &[u8]) -> Result<Reached, Unresolvable> {
        let mut pending: Cow<[u8]> = Cow::Borrowed(rest);
        let mut at = 0;
        while let Some((start, end)) = next_name(&pending, at) {
            at = end;
            let name = &pending[start..end];
            match name {
                b"." => continue,
                b".." => {
                    self.parent();
                    continue;
                }
                _ => {}
            }
            self.resolved.push(OsStr::from_bytes(name));
            if self.missing > 0 {
                self.missing += 1;
                continue;
            }
            if let Some(magic) = magic(&self.resolved) {
                if let Some(stream) = self.stream(&magic, &pending[at..]) {
                    return Ok(Reached::Stream(stream));
                }
                match self.process(&magic, &pending[at..])? {
                    Some(consumed) => {
                        self.missing = 0;
                        at += consumed;
                        continue;
                    }
                    None => return Ok(self.process_file(magic, &pending[at..])),
                }
            }
            match (self.look)(&self.resolved) {
                Seen::Entry => {}
                Seen::Missing => self.missing = 1,
                Seen::Link(None) => return Err(Unresolvable::Unreadable(self.resolved)),
                Seen::Link(Some(target)) => {
                    self.links += 1;
                    if self.links > MAX_LINKS {
                        return Err(Unresolvable::Loop(self.written.to_path_buf()));
                    }
                    let target = target.as_os_str().as_bytes();
                    if target.is_empty() {
                        // An empty link names nothing (`ENOENT`): kept as written.
                        self.missing = 1;
                        continue;
                    }
                    // The target is walked in the link's place, from the link's folder.
                    self.resolved.pop();
                    if target.first() == Some(&b'/') {
                        self.resolved.clear();
                        self.resolved.push("/");
                    }
                    let mut spliced = Vec::with_capacity(target.len() + 1 + pending.len() - at);
                    spliced.extend_from_slice(target);
                    if at < pending.len() {
                        spliced.push(b'/');
                        spliced.extend_from_slice(&pending[at..]);
                    }
                    pending = Cow::Owned(spliced);
                    at = 0;
                }
            }
        }
        Ok(Reached::Path(self.resolved))
    }

    /// `..`: the parent of the folder reached (of a part not found, lexically); `/` stays.
    fn parent(&mut self) {
        self.resolved.pop();
        self.missing = self.missing.saturating_sub(1);
    }

    /// What a process's own name leads to, `rest` being what follows it: the walk goes on
    /// from the folder it names (`Ok(Some(consumed))`, the bytes of `rest` it used), or it
    /// ends there (`Err(reached)`).
    fn process(&mut self, magic: &Magic, rest: &[u8]) -> Result<Option<usize>, Unresolvable> {
        let Frame::Command { cwd } = self.frame else {
            return Ok(None);
        };
        let (first, after) = match next_name(rest, 0) {
            Some((start, end)) => (Some(&rest[start..end]), &rest[end..]),
            None => (None, &rest[rest.len()..]),
        };
        let consumed = rest.len() - after.len();
        match (magic, first) {
            (Magic::OwnProcess, Some(b"cwd")) => {
                let Some(cwd) = cwd else {
                    return Err(Unresolvable::UnknownCwd(self.written.to_path_buf()));
                };
                self.resolved.clear();
                self.resolved.push(cwd);
                Ok(Some(consumed))
            }
            (Magic::OwnProcess, Some(b"root")) => {
                self.resolved.clear();
                self.resolved.push("/");
                Ok(Some(consumed))
            }
            _ => Ok(None),
        }
    }

    /// The command's standard stream `magic` and `rest` name, if that is all they name.
    fn stream(&self, magic: &Magic, rest: &[u8]) -> Option<Stream> {
        if !matches!(self.frame, Frame::Command { .. }) {
            return None;
        }
        let mut names = Vec::with_capacity(2);
        let mut at = 0;
        while let Some((start, end)) = next_name(rest, at) {
            if names.len() == 2 {
                return None;
            }
            names.push(&rest[start..end]);
            at = end;
        }
        // A trailing `/` asks for a folder, which no stream is.
        if rest.last() == Some(&b'/') {
            return None;
        }
        match (magic, names.as_slice()) {
            (Magic::StandardStream(fd), []) => Stream::of(fd),
            (Magic::Descriptors, [fd]) => Stream::of(fd),
            (Magic::OwnProcess, [b"fd", fd]) => Stream::of(fd),
            _ => None,
        }
    }

    /// The name under `/proc` of a process file: `/dev/fd/N` is `/proc/self/fd/N`, the rest
    /// kept as written (never looked up, never normalised out of `/proc/…`).
    fn process_file(mut self, magic: Magic, rest: &[u8]) -> Reached {
        match magic {
            Magic::OwnProcess | Magic::Process => {}
            Magic::Descriptors => self.resolved = PathBuf::from("/proc/self/fd"),
            Magic::StandardStream(fd) => {
                self.resolved = PathBuf::from("/proc/self/fd");
                self.resolved.push(OsStr::from_bytes(fd));
            }
        }
        let mut at = 0;
        while let Some((start, end)) = next_name(rest, at) {
            at = end;
            if &rest[start..end] != b"." {
                self.resolved.push(OsStr::from_bytes(&rest[start..end]));
            }
        }
        Reached::ProcessFile(self.resolved)
    }
}

/// The byte range of the first name in `bytes[at..]` (empty parts skipped), if any.
fn next_name(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = at + bytes.get(at..)?.iter().position(|&b| b != b'/')?;
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'/')
        .map_or(bytes.len(), |n| start + n);
    Some((start, end))
}

/// Whether `path` (just reached, two parts deep at most to match) names a process's own files.
fn magic(path: &Path) -> Option<Magic> {
    let bytes = path.as_os_str().as_bytes();
    if let Some(name) = bytes.strip_prefix(b"/proc/") {
        return match name {
            b"self" | b"thread-self" => Some(Magic::OwnProcess),
            _ if !name.is_empty() && name.iter().all(u8::is_ascii_digit) => Some(Magic::Process),
            _ => None,
        };
    }
    match bytes.strip_prefix(b"/dev/")? {
        b"fd" => Some(Magic::Descriptors),
        b"stdin" => Some(Magic::StandardStream(b"0")),
        b"stdout" => Some(Magic::StandardStream(b"1")),
        b"stderr" => Some(Magic::StandardStream(b"2")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    /// `ws/` with `src/`, `.git/`, a file and these links (`name -> target`).
    fn tree(links: &[(&str, &str)]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/src/deep")).unwrap();
        std::fs::create_dir_all(root.join("ws/.git/hooks")).unwrap();
        std::fs::write(root.join("ws/src/file.rs"), "").unwrap();
        std::fs::write(root.join("ws/.git/config"), "").unwrap();
        for (name, target) in links {
            let target = target.replace("@", &root.display().to_string());
            symlink(target, root.join(name)).unwrap();
        }
        Tree { _dir: dir, root }
    }

    fn at(tree: &Tree, cwd: &str, path: &str) -> Result<Reached, Unresolvable> {
        let cwd = tree.root.join(cwd);
        let path = path.replace("@", &tree.root.display().to_string());
        let roots = [tree.root.join("ws")];
        let frame = Frame::Command { cwd: Some(&cwd) };
        let on_disk = resolve(Path::new(&path), frame, &roots, None);
        let view = DiskView::default();
        let in_view = resolve(Path::new(&path), frame, &roots, Some(&view));
        assert_eq!(on_disk, in_view, "{path}: the disk and a view of it agree");
        on_disk
    }

    fn place(tree: &Tree, relative: &str) -> Result<Reached, Unresolvable> {
        Ok(Reached::Path(tree.root.join(relative)))
    }

    #[test]
    fn dangling_links_lead_to_their_targets_and_links_into_guarded_paths_to_those() {
        let t = tree(&[
            ("ws/src/gc", "../.git/commondir"),
            ("ws/src/hook", "../.git/hooks/pre-commit"),
            ("ws/src/dang", "@/outside/X"),
            ("ws/src/cfg", "../.git/config"),
            ("ws/src/npmrc", "../.npmrc"),
            ("ws/src/to_dang", "dang"),
            ("ws/src/mid", "../.git"),
        ]);
        assert_eq!(at(&t, "ws", "src/gc"), place(&t, "ws/.git/commondir"));
        assert_eq!(
            at(&t, "ws", "src/hook"),
            place(&t, "ws/.git/hooks/pre-commit")
        );
        assert_eq!(at(&t, "ws", "src/dang"), place(&t, "outside/X"));
        assert_eq!(at(&t, "ws", "src/cfg"), place(&t, "ws/.git/config"));
        assert_eq!(at(&t, "ws", "src/npmrc"), place(&t, "ws/.npmrc"));
        // A chain ending in a dangling link; a link in a middle part.
        assert_eq!(at(&t, "ws", "src/to_dang"), place(&t, "outside/X"));
        assert_eq!(
            at(&t, "ws", "src/mid/hooks/post-checkout"),
            place(&t, "ws/.git/hooks/post-checkout")
        );
        // From another working directory, and absolute.
        assert_eq!(at(&t, "ws/src", "gc"), place(&t, "ws/.git/commondir"));
        assert_eq!(at(&t, "/", "@/ws/src/gc"), place(&t, "ws/.git/commondir"));
    }

    #[test]
    fn dot_dot_after_a_link_is_taken_on_its_target_and_missing_parts_are_kept() {
        let t = tree(&[
            ("ws/inner", "src/deep"),
            ("ws/out", "@/elsewhere/a/b"),
            ("ws/src/deep/back", "../../src/../../outside"),
        ]);
        assert_eq!(
            at(&t, "ws", "inner/../file.rs"),
            place(&t, "ws/src/file.rs")
        );
        assert_eq!(at(&t, "ws", "out/../c"), place(&t, "elsewhere/a/c"));
        assert_eq!(at(&t, "ws", "src/deep/back/x"), place(&t, "outside/x"));
        assert_eq!(at(&t, "ws", "new/dir/../../src/x"), place(&t, "ws/src/x"));
        // A folder that does not exist yet, then `..` back into one whose link is followed.
        let t = tree(&[("ws/src/gc", "../.git/commondir")]);
        assert_eq!(
            at(&t, "ws", "made/../src/gc"),
            place(&t, "ws/.git/commondir")
        );
        assert_eq!(
            at(&t, "ws", "../../../../.."),
            Ok(Reached::Path("/".into()))
        );
    }

    #[test]
    fn loops_are_refused_and_long_chains_followed() {
        let t = tree(&[("ws/a", "b"), ("ws/b", "a"), ("ws/self", "self")]);
        for looping in ["a", "b/x", "self"] {
            assert!(
                matches!(at(&t, "ws", looping), Err(Unresolvable::Loop(_))),
                "{looping}"
            );
        }
        let mut links: Vec<(String, String)> = (0..MAX_LINKS)
            .map(|i| (format!("ws/l{i}"), format!("l{}", i + 1)))
            .collect();
        links.push((format!("ws/l{MAX_LINKS}"), "src".into()));
        let refs: Vec<(&str, &str)> = links
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let t = tree(&refs);
        // l0 → l1 → … → l39 → l40 → src: 41 links, one more than the kernel follows.
        assert!(matches!(
            at(&t, "ws", "l0/file.rs"),
            Err(Unresolvable::Loop(_))
        ));
        assert_eq!(at(&t, "ws", "l1/file.rs"), place(&t, "ws/src/file.rs"));
    }

    #[test]
    fn a_process_s_own_names_mean_the_command_s_process() {
        let t = tree(&[
            ("ws/src/me", "/proc/self/cwd"),
            ("ws/src/out", "/dev/stdout"),
        ]);
        let stream = |s| Ok(Reached::Stream(s));
        for (path, want) in [
            ("/dev/stdout", stream(Stream::Stdout)),
            ("/dev/stderr", stream(Stream::Stderr)),
            ("/dev/stdin", stream(Stream::Stdin)),
            ("/dev/fd/1", stream(Stream::Stdout)),
            ("/dev/fd/2", stream(Stream::Stderr)),
            ("/proc/self/fd/0", stream(Stream::Stdin)),
            ("/proc/thread-self/fd/1", stream(Stream::Stdout)),
            ("out", stream(Stream::Stdout)),
            ("/proc/self/cwd/.env", place(&t, "ws/src/.env")),
            ("/proc/thread-self/cwd/../.env", place(&t, "ws/.env")),
            ("me/x", place(&t, "ws/src/x")),
            (
                "/proc/self/root/etc/shadow",
                Ok(Reached::Path("/etc/shadow".into())),
            ),
        ] {
            assert_eq!(at(&t, "ws/src", path), want, "{path}");
        }
        let file = |p: &str| Ok(Reached::ProcessFile(p.into()));
        for (path, want) in [
            ("/dev/fd/3", file("/proc/self/fd/3")),
            ("/dev/fd/1/x", file("/proc/self/fd/1/x")),
            ("/dev/stdout/x", file("/proc/self/fd/1/x")),
            ("/proc/self/fd/63", file("/proc/self/fd/63")),
            ("/proc/self/mem", file("/proc/self/mem")),
            ("/proc/self/environ", file("/proc/self/environ")),
            ("/proc/self/exe", file("/proc/self/exe")),
            ("/proc/self", file("/proc/self")),
            (
                "/proc/thread-self/../../etc",
                file("/proc/thread-self/../../etc"),
            ),
            ("/proc/self/../cpuinfo", file("/proc/self/../cpuinfo")),
            ("/proc/self/root/proc/self/fd/5", file("/proc/self/fd/5")),
            ("/proc/1/cwd/.env", file("/proc/1/cwd/.env")),
            ("/proc/1/../self/cwd", file("/proc/1/../self/cwd")),
        ] {
            assert_eq!(at(&t, "ws", path), want, "{path}");
        }
        // tollgate's own frame: all of them are process files.
        for (path, named) in [
            ("/proc/self/cwd/.env", "/proc/self/cwd/.env"),
            ("/dev/stdout", "/proc/self/fd/1"),
            ("/dev/fd/1", "/proc/self/fd/1"),
        ] {
            assert_eq!(
                resolve(Path::new(path), Frame::Tool, &[] as &[&Path], None),
                file(named),
                "{path}"
            );
        }
        // A working directory not known: `/proc/self/cwd` and relative paths are not located.
        let unknown = Frame::Command { cwd: None };
        for path in ["/proc/self/cwd/x", "x"] {
            assert!(matches!(
                resolve(Path::new(path), unknown, &[] as &[&Path], None),
                Err(Unresolvable::UnknownCwd(_))
            ));
        }
    }

    #[test]
    fn without_a_disk_only_the_lexical_rules_apply() {
        let cwd = Path::new("/ws/src");
        let frame = Frame::Command { cwd: Some(cwd) };
        for (path, want) in [
            ("a/../b", "/ws/src/b"),
            ("/proc/self/cwd/x", "/ws/src/x"),
            ("../../..", "/"),
            ("/dev/stdout", "/dev/stdout"),
            ("/dev/fd/3", "/proc/self/fd/3"),
        ] {
            assert_eq!(
                resolve_without_disk(Path::new(path), frame).map(Reached::into_path),
                Ok(PathBuf::from(want)),
                "{path}"
            );
        }
    }
}
