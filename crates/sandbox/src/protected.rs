//! The files in the workspace a sandboxed command must not change but Landlock cannot keep
//! read-only: what git obeys or runs (every git directory's `config`, `hooks/`, `info/`…,
//! submodules' under `.git/modules/`, nested repositories anywhere) and the write
//! guardrails' files (`.envrc`, `.gitmodules`, `.claude/`, CI definitions…) at any depth.
//!
//! Landlock only allows, and a grant on a folder covers everything below it, so a workspace
//! whose top level is writable (a build's `target/`, `npm install`'s `node_modules/`) cannot
//! also have a read-only `.git/config` or a `src/.envrc` that does not exist yet. Instead the
//! run keeps a baseline of these paths taken before any command, and after every sandboxed
//! command (and before the trusted side acts) compares each with it and puts it back: a file
//! changed is rewritten, one created (a nested repository's `.git` config included) removed,
//! one removed recreated. Each such change is a [`Violation`] the caller reports.
//!
//! tollgate changes only what it owns. It puts back only the paths it recorded at the start
//! (and the workdir's own `.git`, recorded even when absent); a protected path that appears
//! later is removed only inside the workdir and only in a folder recorded at the start (the
//! same inode), reached without a link — anything else is reported and left as it is, so a
//! process writing repositories in an additional directory (or anywhere else) is never
//! undone. Additional directories are recorded and put back, never searched again.
//!
//! The check runs after every command, so it remembers what it already saw: a folder's
//! listing and a protected path found equal to the baseline (a folder with every inode
//! below it) are kept with the inode's change time
//! (`ctime`, which a command cannot set back), and reused while that is unchanged. Only what
//! settled before it was looked at is remembered, so a change made within the clock's
//! granularity of the look is never mistaken for the state it saw.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use tollgate_policy::{fold, may_guard_name, write_guardrail};

/// What a baseline may hold: enough for any project's hooks and settings, bounded so a
/// giant folder under a guarded name cannot make every command slow or the run huge.
const MAX_BYTES: u64 = 64 << 20;
const MAX_ENTRIES: usize = 20_000;

/// Members of a git directory that git obeys as config or runs as code (`info/attributes`
/// names filters, `commondir` points at another git directory).
const GIT_DIR_MEMBERS: [&str; 5] = ["config", "config.worktree", "hooks", "info", "commondir"];

/// Under `.tollgate/`: the runs' and batches' output, which tollgate itself writes while a
/// command runs, is not part of the baseline.
const TOLLGATE_OUTPUT: [&str; 2] = ["runs", "batch"];

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the protected files in the workspace exceed {} MiB or {MAX_ENTRIES} entries (at {}); \
         they cannot be kept read-only for sandboxed commands",
        MAX_BYTES >> 20,
        path.display()
    )]
    TooLarge { path: PathBuf },
}

/// One protected path as it is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Absent,
    File {
        mode: u32,
        bytes: Vec<u8>,
    },
    Link(PathBuf),
    Dir {
        mode: u32,
        entries: BTreeMap<OsString, Node>,
    },
    /// A fifo, socket or device: compared by kind; never restored.
    Other,
}

/// What a command did to a protected path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Created,
    Modified,
    Removed,
}

/// A protected path a command changed, and whether it was put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Relative to its workspace root.
    pub path: PathBuf,
    pub change: Change,
    /// Why it could not be put back; `None` when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrestored: Option<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let change = match self.change {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Removed => "removed",
        };
        write!(f, "{} ({change}", self.path.display())?;
        match &self.unrestored {
            None => write!(f, ", restored)"),
            Some(why) => write!(f, ", NOT restored: {why})"),
        }
    }
}

/// The sentence a tool result or a check's output ends with.
pub fn describe(violations: &[Violation]) -> String {
    let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
    format!(
        "sandbox: this command changed protected files, which are read-only for sandboxed \
         commands: {}",
        list.join(", ")
    )
}

/// The baseline of one run's workspace roots.
#[derive(Debug)]
pub struct ProtectedFiles {
    /// The workdir first, then the additional directories.
    roots: Vec<PathBuf>,
    /// Never compared or restored: the run's own output folder.
    excluded: Vec<PathBuf>,
    baseline: BTreeMap<PathBuf, Node>,
    /// Every folder of the workdir at the start, with its inode: where a protected path that
    /// appears later may be removed.
    folders: HashMap<PathBuf, (u64, u64)>,
    memo: Mutex<Memo>,
}

/// Why a protected path that appeared during the run is left where it is.
const NOT_RECORDED: &str = "it was not there at the start, in a folder the run did not record \
     (or through a link): tollgate removes only what it recorded";

/// How long a change must be past before what it left is remembered: well above the
/// coarse clock the kernel stamps inodes with (a jiffy, at most 10 ms).
const SETTLED: Duration = Duration::from_secs(2);

/// What an inode looked like, enough to tell that it did not change since: a write, a
/// create, remove or rename inside a folder, `chmod` and `utimensat` all move `ctime`
/// forward, and a replacement is another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    ctime: (i64, i64),
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: metadata.dev(),
            ino: metadata.ino(),
            mode: metadata.mode(),
            size: metadata.size(),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// Whether the last change is at least `settled` before `now`.
    fn settled(&self, now: SystemTime, settled: Duration) -> bool {
        let (Ok(secs), Ok(nanos)) = (u64::try_from(self.ctime.0), u32::try_from(self.ctime.1))
        else {
            return false;
        };
        let changed = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
        now.duration_since(changed).is_ok_and(|age| age >= settled)
    }
}

/// What the check already saw, by path.
#[derive(Debug, Default)]
struct Memo {
    /// A folder's entries the walk acts on, as classified when it was listed.
    listings: HashMap<PathBuf, (Stamp, Vec<Listed>)>,
    /// Paths found equal to their baseline, with the stamp of every inode at and below them
    /// (a folder's own stamp moves when an entry is added, removed or renamed; a file's when
    /// it is written).
    clean: HashMap<PathBuf, Vec<(PathBuf, Stamp)>>,
    settled: Duration,
}

/// An entry of a listed folder that the walk acts on (plain files are not kept).
#[derive(Debug)]
enum Listed {
    Folder(PathBuf),
    GitDir(PathBuf),
    Tollgate(PathBuf),
    Protected(PathBuf),
}

impl ProtectedFiles {
    /// Reads every protected path below `roots` (the workdir first) as it is now, and the
    /// workdir's folders.
    pub fn capture(roots: &[PathBuf], excluded: &[PathBuf]) -> Result<ProtectedFiles, GuardError> {
        let mut files = ProtectedFiles {
            roots: roots.to_vec(),
            excluded: excluded.to_vec(),
            baseline: BTreeMap::new(),
            folders: HashMap::new(),
            memo: Mutex::new(Memo {
                settled: SETTLED,
                ..Memo::default()
            }),
        };
        let mut budget = Budget::default();
        let mut folders = HashMap::new();
        let mut found = {
            let mut memo = files.memo.lock().unwrap_or_else(PoisonError::into_inner);
            files.discover(&files.roots, &mut memo, Some(&mut folders))
        };
        // A repository made where there was none would be obeyed by git run in the workdir:
        // its absence is recorded too (a present one is recorded member by member).
        found.extend(
            files
                .roots
                .first()
                .map(|workdir| workdir.join(".git"))
                .filter(|git| git.symlink_metadata().is_err()),
        );
        for path in found {
            let node = read_node(&path, &mut budget)?;
            files.baseline.insert(path, node);
        }
        files.folders = folders;
        Ok(files)
    }

    /// How many protected paths the baseline holds.
    pub(super) fn len(&self) -> usize {
        self.baseline.len()
    }

    /// Compares every recorded path with the baseline and puts back what differs; then
    /// reports what appeared in the workdir since, removing only what stands in a folder the
    /// run recorded (see the module's comment).
    pub fn restore(&self) -> Vec<Violation> {
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        let mut violations = Vec::new();
        // Nothing here is bounded by the budget: what a command planted is read to compare
        // it, whatever its size, and a path that cannot be read is put back regardless.
        let mut budget = Budget::unbounded();
        let now = SystemTime::now();
        for (path, want) in &self.baseline {
            if memo.unchanged(path, want, now) {
                continue;
            }
            let root = self.root_of(path);
            // Reached through a link, the path names something else: put back, never read.
            let now_node = beneath_without_links(root, path)
                .then(|| read_node(path, &mut budget).ok())
                .flatten();
            if now_node.as_ref() == Some(want) {
                memo.remember_clean(path, want, now);
                continue;
            }
            memo.clean.remove(path);
            let change = match (want, &now_node) {
                (Node::Absent, _) => Change::Created,
                (_, Some(Node::Absent)) => Change::Removed,
                _ => Change::Modified,
            };
            let unrestored = put_back(root, path, want).err().map(|err| err.to_string());
            violations.push(Violation {
                path: path.strip_prefix(root).unwrap_or(path).to_path_buf(),
                change,
                unrestored,
            });
        }
        let Some(workdir) = self.roots.first() else {
            return violations;
        };
        let mut appeared = self.discover(std::slice::from_ref(workdir), &mut memo, None);
        appeared.sort();
        appeared.dedup();
        for path in appeared {
            // A recorded path, or one below it, was dealt with above.
            if self
                .baseline
                .keys()
                .any(|recorded| path.starts_with(recorded))
                || path.symlink_metadata().is_err()
            {
                continue;
            }
            let unrestored = if self.recorded_folder_holds(workdir, &path) {
                remove(&path).err().map(|err| err.to_string())
            } else {
                Some(NOT_RECORDED.to_string())
            };
            violations.push(Violation {
                path: path.strip_prefix(workdir).unwrap_or(&path).to_path_buf(),
                change: Change::Created,
                unrestored,
            });
        }
        violations
    }

    /// Whether `path`'s folder is one the run recorded in the workdir, still the same inode,
    /// and reached from the workdir without a link.
    fn recorded_folder_holds(&self, workdir: &Path, path: &Path) -> bool {
        let Some(parent) = path.parent() else {
            return false;
        };
        beneath_without_links(workdir, path)
            && parent.symlink_metadata().is_ok_and(|metadata| {
                metadata.is_dir()
                    && self.folders.get(parent) == Some(&(metadata.dev(), metadata.ino()))
            })
    }

    fn root_of(&self, path: &Path) -> &Path {
        self.roots
            .iter()
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.as_os_str().len())
            .map_or(Path::new("/"), PathBuf::as_path)
    }

    /// The protected paths that exist now below `roots`; with `folders`, every folder walked
    /// is recorded there with its inode.
    fn discover(
        &self,
        roots: &[PathBuf],
        memo: &mut Memo,
        mut folders: Option<&mut HashMap<PathBuf, (u64, u64)>>,
    ) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let now = SystemTime::now();
        for root in roots {
            let walk = Walk {
                root,
                excluded: &self.excluded,
                now,
                folders: std::cell::RefCell::new(folders.as_deref_mut()),
            };
            walk.dir(root, &mut found, memo);
        }
        found
    }
}

impl Memo {
    /// Whether `path` is what the check found equal to `want` and nothing at or below it has
    /// changed since.
    fn unchanged(&self, path: &Path, want: &Node, now: SystemTime) -> bool {
        if matches!(want, Node::Absent) {
            return false;
        }
        let Some(seen) = self.clean.get(path) else {
            return false;
        };
        seen.iter().all(|(path, seen)| {
            path.symlink_metadata().is_ok_and(|metadata| {
                let stamp = Stamp::of(&metadata);
                stamp == *seen && stamp.settled(now, self.settled)
            })
        })
    }

    fn remember_clean(&mut self, path: &Path, want: &Node, now: SystemTime) {
        let mut stamps = Vec::new();
        if !matches!(want, Node::Absent) && stamps_below(path, want, now, self.settled, &mut stamps)
        {
            self.clean.insert(path.to_path_buf(), stamps);
        } else {
            self.clean.remove(path);
        }
    }
}

/// The stamps of `path` and of every entry of `node` below it, or false when one is missing
/// or changed too recently to be trusted.
fn stamps_below(
    path: &Path,
    node: &Node,
    now: SystemTime,
    settled: Duration,
    stamps: &mut Vec<(PathBuf, Stamp)>,
) -> bool {
    let Ok(metadata) = path.symlink_metadata() else {
        return false;
    };
    let stamp = Stamp::of(&metadata);
    if !stamp.settled(now, settled) {
        return false;
    }
    stamps.push((path.to_path_buf(), stamp));
    match node {
        Node::Dir { entries, .. } => entries
            .iter()
            .all(|(name, entry)| stamps_below(&path.join(name), entry, now, settled, stamps)),
        _ => true,
    }
}

struct Walk<'a, 'f> {
    root: &'a Path,
    excluded: &'a [PathBuf],
    now: SystemTime,
    /// Where the capture records the folders it walks.
    folders: std::cell::RefCell<Option<&'f mut HashMap<PathBuf, (u64, u64)>>>,
}

impl Walk<'_, '_> {
    /// Every protected path below `dir`; a folder not changed since it was last listed is
    /// not listed again.
    fn dir(&self, dir: &Path, found: &mut Vec<PathBuf>, memo: &mut Memo) {
        // The stamp is taken before the listing: a change while listing moves it on.
        let Ok(metadata) = dir.symlink_metadata() else {
            return;
        };
        let stamp = Stamp::of(&metadata);
        if let Some(folders) = self.folders.borrow_mut().as_deref_mut() {
            folders.insert(dir.to_path_buf(), (stamp.dev, stamp.ino));
        }
        // Taken out while the walk goes below, and put back after: no copy of the listing.
        let (key, listed) = match memo.listings.remove_entry(dir) {
            Some((key, (seen, listed)))
                if seen == stamp && stamp.settled(self.now, memo.settled) =>
            {
                (Some(key), listed)
            }
            _ => (None, self.list(dir)),
        };
        for entry in &listed {
            match entry {
                Listed::Folder(path) => self.dir(path, found, memo),
                Listed::GitDir(path) => git_dir(path, found),
                Listed::Tollgate(path) => self.tollgate(path, found),
                Listed::Protected(path) => self.protect(path.clone(), found),
            }
        }
        if stamp.settled(self.now, memo.settled) {
            let key = key.unwrap_or_else(|| dir.to_path_buf());
            memo.listings.insert(key, (stamp, listed));
        }
    }

    /// The entries of `dir` the walk acts on.
    fn list(&self, dir: &Path) -> Vec<Listed> {
        let mut listed = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return listed;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if self.excluded.iter().any(|ex| path.starts_with(ex)) {
                continue;
            }
            let file_name = entry.file_name();
            let name = fold(&file_name.to_string_lossy()).into_owned();
            if name == ".git" {
                listed.push(if kind.is_dir() {
                    Listed::GitDir(path)
                } else {
                    // A gitfile names the git directory to use: changing it redirects git.
                    Listed::Protected(path)
                });
                continue;
            }
            if name == ".tollgate" && kind.is_dir() {
                listed.push(Listed::Tollgate(path));
                continue;
            }
            let rel = path.strip_prefix(self.root).unwrap_or(&path);
            // A HEAD outside a git directory is the guardrails' concern for the file tools;
            // for commands, git refuses a repository it merely discovers (git_env), and a
            // HEAD written by every checkout is no file to keep still.
            if name != "head" && may_guard_name(&name) && write_guardrail(rel, None).is_some() {
                listed.push(Listed::Protected(path));
                continue;
            }
            if kind.is_dir() {
                listed.push(Listed::Folder(path));
            }
        }
        listed
    }

    /// A protected path, or its entries one by one when the run's output is inside it.
    fn protect(&self, path: PathBuf, found: &mut Vec<PathBuf>) {
        if self
            .excluded
            .iter()
            .any(|ex| ex.starts_with(&path) && ex != &path)
        {
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let child = entry.path();
                if !self.excluded.iter().any(|ex| child.starts_with(ex)) {
                    self.protect(child, found);
                }
            }
        } else {
            found.push(path);
        }
    }

    fn tollgate(&self, dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let file_name = entry.file_name();
            let lossy = file_name.to_string_lossy();
            let name = fold(&lossy);
            if !TOLLGATE_OUTPUT.contains(&&*name) {
                self.protect(entry.path(), found);
            }
        }
    }
}

/// The members of the git directory `dir` that exist, and those of its submodules' git
/// directories (`modules/<name>/`, names may hold slashes) and worktrees.
fn git_dir(dir: &Path, found: &mut Vec<PathBuf>) {
    for member in GIT_DIR_MEMBERS {
        let path = dir.join(member);
        if path.symlink_metadata().is_ok() {
            found.push(path);
        }
    }
    modules(&dir.join("modules"), found);
    for entry in std::fs::read_dir(dir.join("worktrees"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path().join("config.worktree");
        if path.symlink_metadata().is_ok() {
            found.push(path);
        }
    }
}

fn modules(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let path = entry.path();
        let is_git_dir = ["HEAD", "config"]
            .iter()
            .any(|name| path.join(name).symlink_metadata().is_ok());
        if is_git_dir {
            git_dir(&path, found);
        } else {
            modules(&path, found);
        }
    }
}

#[derive(Default)]
struct Budget {
    bytes: u64,
    entries: usize,
    unbounded: bool,
}

impl Budget {
    fn unbounded() -> Budget {
        Budget {
            unbounded: true,
            ..Budget::default()
        }
    }

    fn spend(&mut self, path: &Path, bytes: u64) -> Result<(), GuardError> {
        self.bytes = self.bytes.saturating_add(bytes);
        self.entries += 1;
        if !self.unbounded && (self.bytes > MAX_BYTES || self.entries > MAX_ENTRIES) {
            return Err(GuardError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }
}

/// Whether every folder between `root` and `path` is a real folder, not a link: what is
/// found there is inside the root, not wherever a link points.
fn beneath_without_links(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let mut current = root.to_path_buf();
    let mut parts = rel.components().peekable();
    while let Some(part) = parts.next() {
        let Component::Normal(name) = part else {
            return false;
        };
        if parts.peek().is_none() {
            return true;
        }
        current.push(name);
        match current.symlink_metadata() {
            Ok(metadata) if metadata.is_dir() => {}
            // A missing folder: nothing below it to reach (or to follow).
            Err(_) => return true,
            Ok(_) => return false,
        }
    }
    true
}

fn read_node(path: &Path, budget: &mut Budget) -> Result<Node, GuardError> {
    let read_err = |source| GuardError::Read {
        path: path.to_path_buf(),
        source,
    };
    let metadata = match path.symlink_metadata() {
        Ok(metadata) => metadata,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Node::Absent);
        }
        Err(err) => return Err(read_err(err)),
    };
    let kind = metadata.file_type();
    let mode = metadata.mode() & 0o7777;
    if kind.is_symlink() {
        budget.spend(path, 0)?;
        return Ok(Node::Link(std::fs::read_link(path).map_err(read_err)?));
    }
    if kind.is_file() {
        budget.spend(path, metadata.len())?;
        return Ok(Node::File {
            mode,
            bytes: std::fs::read(path).map_err(read_err)?,
        });
    }
    if kind.is_dir() {
        budget.spend(path, 0)?;
        let mut entries = BTreeMap::new();
        for entry in std::fs::read_dir(path).map_err(read_err)? {
            let entry = entry.map_err(read_err)?;
            let node = read_node(&entry.path(), budget)?;
            entries.insert(entry.file_name(), node);
        }
        return Ok(Node::Dir { mode, entries });
    }
    budget.spend(path, 0)?;
    Ok(Node::Other)
}

/// Makes `path` what `want` says: its folders on the way from `root` real folders again,
/// whatever is there now removed (never followed), then `want` written.
fn put_back(root: &Path, path: &Path, want: &Node) -> std::io::Result<()> {
    if *want != Node::Absent
        && let Some(parent) = path.parent()
    {
        real_folders(root, parent)?;
    }
    remove(path)?;
    write_node(path, want)
}

fn real_folders(root: &Path, dir: &Path) -> std::io::Result<()> {
    let Ok(rel) = dir.strip_prefix(root) else {
        return Ok(());
    };
    let mut current = root.to_path_buf();
    for component in rel.components() {
        let Component::Normal(name) = component else {
            continue;
        };
        current.push(name);
        match current.symlink_metadata() {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                std::fs::remove_file(&current)?;
                std::fs::create_dir(&current)?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&current)?;
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

fn remove(path: &Path) -> std::io::Result<()> {
    match path.symlink_metadata() {
        // remove_dir_all removes symbolic links inside without following them.
        Ok(metadata) if metadata.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(())
        }
        Err(err) => Err(err),
    }
}

fn write_node(path: &Path, node: &Node) -> std::io::Result<()> {
    match node {
        Node::Absent | Node::Other => Ok(()),
        Node::File { mode, bytes } => {
            // create_new: a link planted in the meantime is not followed.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(*mode)
                .open(path)?;
            file.write_all(bytes)?;
            file.set_permissions(std::fs::Permissions::from_mode(*mode))
        }
        Node::Link(target) => std::os::unix::fs::symlink(target, path),
        Node::Dir { mode, entries } => {
            std::fs::create_dir(path)?;
            for (name, entry) in entries {
                write_node(&path.join(name), entry)?;
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        for folder in [
            ".git/hooks",
            ".git/info",
            ".git/objects",
            ".git/modules/lib/hooks",
            "src/nest/.git",
            "lib",
            ".tollgate/runs/r1",
        ] {
            fs::create_dir_all(ws.join(folder)).unwrap();
        }
        for (file, text) in [
            (".git/config", "[core]\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".git/modules/lib/config", "[core]\n"),
            (".git/modules/lib/HEAD", "ref: refs/heads/main\n"),
            ("src/nest/.git/config", "[core]\n"),
            ("lib/.git", "gitdir: ../.git/modules/lib\n"),
            (".gitmodules", "[submodule \"lib\"]\n"),
            (".tollgate/policy.yaml", "permissions: {}\n"),
            ("src/main.rs", "fn main() {}\n"),
        ] {
            fs::write(ws.join(file), text).unwrap();
        }
        (dir, ws)
    }

    fn rel(violations: &[Violation]) -> Vec<(String, Change)> {
        violations
            .iter()
            .inspect(|v| assert_eq!(v.unrestored, None, "{v}"))
            .map(|v| (v.path.display().to_string(), v.change.clone()))
            .collect()
    }

    /// The violations left in place because the run did not record them.
    fn left(violations: &[Violation]) -> Vec<String> {
        let mut left: Vec<String> = violations
            .iter()
            .filter(|v| v.unrestored.as_deref() == Some(NOT_RECORDED))
            .map(|v| v.path.display().to_string())
            .collect();
        left.sort();
        left
    }

    fn restored(violations: &[Violation]) -> Vec<Violation> {
        violations
            .iter()
            .filter(|v| v.unrestored.as_deref() != Some(NOT_RECORDED))
            .cloned()
            .collect()
    }

    #[test]
    fn every_protected_path_is_put_back_and_named() {
        let (_dir, ws) = workspace();
        let out = ws.join(".tollgate/runs/r1");
        let files =
            ProtectedFiles::capture(std::slice::from_ref(&ws), std::slice::from_ref(&out)).unwrap();
        assert!(files.restore().is_empty());
        fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        fs::write(ws.join(".git/hooks/pre-commit"), "evil").unwrap();
        fs::write(ws.join(".git/info/attributes"), "* filter=evil").unwrap();
        fs::write(
            ws.join(".git/modules/lib/config"),
            "[core]\n\tfsmonitor=x\n",
        )
        .unwrap();
        fs::write(ws.join(".git/modules/lib/hooks/post-checkout"), "evil").unwrap();
        fs::write(ws.join("src/nest/.git/config"), "[core]\n\tfsmonitor=x\n").unwrap();
        fs::write(ws.join("src/.envrc"), "evil").unwrap();
        fs::remove_file(ws.join(".gitmodules")).unwrap();
        fs::create_dir_all(ws.join("tests/made/.git/hooks")).unwrap();
        fs::write(ws.join("tests/made/.git/config"), "[core]\n").unwrap();
        fs::write(ws.join(".tollgate/policy.yaml"), "evil").unwrap();
        // What is not protected, and the run's own output, stay as the command left them.
        fs::write(ws.join("src/main.rs"), "changed").unwrap();
        fs::write(ws.join(".git/objects/x"), "object").unwrap();
        fs::write(out.join("transcript.jsonl"), "{}").unwrap();
        fs::create_dir(ws.join("target")).unwrap();
        let violations = files.restore();
        // A repository in a folder made during the run was not recorded: named, left.
        assert_eq!(
            left(&violations),
            ["tests/made/.git/config", "tests/made/.git/hooks"]
        );
        let mut got = rel(&restored(&violations));
        got.sort();
        let mut want = vec![
            (".git/config".to_string(), Change::Modified),
            (".git/hooks".to_string(), Change::Modified),
            (".git/info".to_string(), Change::Modified),
            (".git/modules/lib/config".to_string(), Change::Modified),
            (".git/modules/lib/hooks".to_string(), Change::Modified),
            (".gitmodules".to_string(), Change::Removed),
            (".tollgate/policy.yaml".to_string(), Change::Modified),
            ("src/.envrc".to_string(), Change::Created),
            ("src/nest/.git/config".to_string(), Change::Modified),
        ];
        want.sort();
        assert_eq!(got, want);
        assert_eq!(
            fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert!(!ws.join(".git/info/attributes").exists());
        assert!(!ws.join("src/.envrc").exists());
        assert!(ws.join("tests/made/.git/config").exists());
        assert!(ws.join(".gitmodules").exists());
        assert_eq!(
            fs::read_to_string(ws.join("src/main.rs")).unwrap(),
            "changed"
        );
        assert!(ws.join(".git/objects/x").exists() && ws.join("target").is_dir());
        assert!(out.join("transcript.jsonl").exists());
        assert!(restored(&files.restore()).is_empty());
    }

    #[test]
    fn a_folder_swapped_for_a_link_is_a_folder_again_and_the_target_is_untouched() {
        let (dir, ws) = workspace();
        fs::write(ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(
            ws.join(".git/hooks/pre-commit"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let files = ProtectedFiles::capture(std::slice::from_ref(&ws), &[]).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::write(elsewhere.join("pre-commit"), "evil").unwrap();
        fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join(".git/hooks")).unwrap();
        // A hard link to a protected file changes it too: the file is replaced, not written.
        fs::hard_link(ws.join(".git/config"), ws.join("src/alias")).unwrap();
        fs::write(ws.join("src/alias"), "evil").unwrap();
        let got = rel(&files.restore());
        assert_eq!(got.len(), 2, "{got:?}");
        let hook = ws.join(".git/hooks/pre-commit");
        assert!(ws.join(".git/hooks").symlink_metadata().unwrap().is_dir());
        assert_eq!(fs::read_to_string(&hook).unwrap(), "#!/bin/sh\n");
        assert_eq!(hook.metadata().unwrap().mode() & 0o777, 0o755);
        assert_eq!(
            fs::read_to_string(elsewhere.join("pre-commit")).unwrap(),
            "evil"
        );
        assert_eq!(
            fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n"
        );
    }

    #[test]
    fn what_the_check_remembers_never_hides_a_later_change() {
        let (_dir, ws) = workspace();
        let files = ProtectedFiles::capture(std::slice::from_ref(&ws), &[]).unwrap();
        let settled = Duration::from_millis(50);
        files.memo.lock().unwrap().settled = settled;
        std::thread::sleep(settled * 3);
        assert!(files.restore().is_empty());
        {
            let memo = files.memo.lock().unwrap();
            assert!(memo.clean.contains_key(&ws.join(".git/config")), "{memo:?}");
            assert!(memo.listings.contains_key(&ws.join("src")), "{memo:?}");
        }
        assert!(
            files.restore().is_empty(),
            "a remembered state is no change"
        );
        // Same size, and the modification time set back: only the change time tells.
        let config = ws.join(".git/config");
        let before = config.metadata().unwrap().modified().unwrap();
        fs::write(&config, "[evil]\n").unwrap();
        fs::File::options()
            .write(true)
            .open(&config)
            .unwrap()
            .set_modified(before)
            .unwrap();
        // A new guarded file inside a folder whose listing was remembered.
        fs::write(ws.join("src/.envrc"), "evil").unwrap();
        let mut got = rel(&files.restore());
        got.sort();
        assert_eq!(
            got,
            vec![
                (".git/config".to_string(), Change::Modified),
                ("src/.envrc".to_string(), Change::Created),
            ]
        );
        assert_eq!(fs::read_to_string(&config).unwrap(), "[core]\n");
        std::thread::sleep(settled * 3);
        assert!(files.restore().is_empty());
        fs::write(ws.join("src/.npmrc"), "evil").unwrap();
        assert_eq!(
            rel(&files.restore()),
            vec![("src/.npmrc".to_string(), Change::Created)]
        );
    }

    #[test]
    fn only_what_was_recorded_is_changed_and_no_link_is_followed_out() {
        let (dir, ws) = workspace();
        // An additional directory, as a temporary root another process works in.
        let shared = dir.path().canonicalize().unwrap().join("shared");
        fs::create_dir_all(shared.join("kept/.git/hooks")).unwrap();
        fs::write(shared.join("kept/.git/config"), "[core]\n").unwrap();
        fs::write(shared.join("kept/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let elsewhere = dir.path().canonicalize().unwrap().join("elsewhere");
        fs::create_dir_all(elsewhere.join("wt")).unwrap();
        fs::write(elsewhere.join("wt/config.worktree"), "mine").unwrap();
        let files = ProtectedFiles::capture(&[ws.clone(), shared.clone()], &[]).unwrap();
        assert!(
            files
                .baseline
                .contains_key(&shared.join("kept/.git/config"))
        );
        // Another process creates repositories in the additional directory while commands
        // run, and a command links the workdir's worktrees folder out.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut made = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || made < 20 {
                    let repo = shared.join(format!("r{made}/.git"));
                    fs::create_dir_all(repo.join("hooks")).unwrap();
                    fs::write(repo.join("config"), "[core]\n\tbare = false\n").unwrap();
                    fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
                    fs::write(shared.join(format!("r{made}/.envrc")), "use nix\n").unwrap();
                    made += 1;
                }
                made
            })
        };
        std::os::unix::fs::symlink(&elsewhere, ws.join(".git/worktrees")).unwrap();
        for _ in 0..20 {
            for violation in files.restore() {
                assert!(
                    !violation.path.starts_with("r") && !violation.path.starts_with(&shared),
                    "a path tollgate did not record was reported: {violation}"
                );
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let made = writer.join().unwrap();
        files.restore();
        for at in 0..made {
            let repo = shared.join(format!("r{at}"));
            assert_eq!(
                fs::read_to_string(repo.join(".git/config")).unwrap(),
                "[core]\n\tbare = false\n"
            );
            assert!(repo.join(".git/hooks").is_dir() && repo.join(".envrc").is_file());
        }
        assert_eq!(
            fs::read_to_string(elsewhere.join("wt/config.worktree")).unwrap(),
            "mine",
            "the link out was not followed"
        );
        // The recorded repository of the additional directory is still put back.
        fs::remove_file(ws.join(".git/worktrees")).unwrap();
        fs::write(shared.join("kept/.git/config"), "[core]\n\tfsmonitor=x\n").unwrap();
        let got = rel(&files.restore());
        assert_eq!(
            got,
            vec![("kept/.git/config".to_string(), Change::Modified)]
        );
    }

    #[test]
    fn a_repository_made_at_the_workdir_where_there_was_none_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        fs::create_dir(ws.join("src")).unwrap();
        let files = ProtectedFiles::capture(std::slice::from_ref(&ws), &[]).unwrap();
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let got = rel(&files.restore());
        assert_eq!(got, vec![(".git".to_string(), Change::Created)]);
        assert!(!ws.join(".git").exists());
    }

    #[test]
    fn a_remembered_folder_still_shows_a_change_anywhere_below_it() {
        let (_dir, ws) = workspace();
        fs::create_dir_all(ws.join(".git/hooks/deep")).unwrap();
        fs::write(ws.join(".git/hooks/deep/post-merge"), "#!/bin/sh\n").unwrap();
        let files = ProtectedFiles::capture(std::slice::from_ref(&ws), &[]).unwrap();
        let settled = Duration::from_millis(50);
        files.memo.lock().unwrap().settled = settled;
        std::thread::sleep(settled * 3);
        assert!(files.restore().is_empty());
        let hooks = ws.join(".git/hooks");
        assert!(
            files.memo.lock().unwrap().clean.contains_key(&hooks),
            "a settled folder is remembered"
        );
        let nested = hooks.join("deep/post-merge");
        let planted = hooks.join("pre-commit");
        type Hostile<'a> = (&'static str, Box<dyn Fn() + 'a>);
        let hostile: [Hostile; 3] = [
            (
                "a file two levels down rewritten, same size, mtime set back",
                Box::new(|| {
                    let before = nested.metadata().unwrap().modified().unwrap();
                    fs::write(&nested, "#!/bin/X\n").unwrap();
                    fs::File::options()
                        .write(true)
                        .open(&nested)
                        .unwrap()
                        .set_modified(before)
                        .unwrap();
                }),
            ),
            (
                "a new hook",
                Box::new(|| fs::write(&planted, "evil").unwrap()),
            ),
            (
                "a file's mode changed",
                Box::new(|| {
                    fs::set_permissions(&nested, fs::Permissions::from_mode(0o777)).unwrap();
                }),
            ),
        ];
        for (what, change) in hostile {
            change();
            assert_eq!(files.restore().len(), 1, "{what}");
            assert!(files.restore().is_empty(), "{what}: put back");
            std::thread::sleep(settled * 3);
            assert!(files.restore().is_empty(), "{what}: settled again");
        }
        assert!(!planted.exists());
        assert_eq!(fs::read_to_string(&nested).unwrap(), "#!/bin/sh\n");
    }

    #[test]
    fn a_baseline_too_large_to_keep_is_an_error() {
        let (_dir, ws) = workspace();
        let big = vec![0u8; usize::try_from(MAX_BYTES).unwrap() + 1];
        fs::write(ws.join(".git/hooks/huge"), big).unwrap();
        let err = ProtectedFiles::capture(std::slice::from_ref(&ws), &[]).unwrap_err();
        assert!(matches!(err, GuardError::TooLarge { .. }), "{err}");
    }
}
