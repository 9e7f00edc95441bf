//! Where a path word points: tilde, working directory (which `cd` may have changed), and what
//! the command's lookup reaches from there (via the injected resolver: links followed,
//! dangling ones too, `..` on the folder reached, `/proc/self` and `/dev/fd` as the command's
//! own), and whether it stays inside the workspace.

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use tollgate_base::Frame;

use super::unproven::Unproven;
use super::word::{PROCESS_SUBSTITUTION, Word};
use super::{BashEnv, ReadAccess};

/// More possible working directories than this are not tracked.
const MAX_CWDS: usize = 8;

/// The directories the script may be in at a given point. A `cd` may fail, so the old
/// directory stays possible; every relative path must be inside from each of them.
#[derive(Debug, Clone)]
pub(crate) enum Cwds {
    Known(Vec<PathBuf>),
    /// A `cd` in a loop or function, to an unknown place, or too many: relative paths are
    /// no longer provable.
    Unknown,
}

impl Cwds {
    pub fn new(cwd: &Path) -> Cwds {
        Cwds::Known(vec![cwd.to_path_buf()])
    }

    /// Records that the script may now be in `targets` too.
    pub fn add(&mut self, targets: Vec<PathBuf>) {
        if let Cwds::Known(list) = self {
            for t in targets {
                if !list.contains(&t) {
                    list.push(t);
                }
            }
            if list.len() > MAX_CWDS {
                *self = Cwds::Unknown;
            }
        }
    }
}

/// The paths a word may name (one per possible cwd), each as the command's lookup reaches it
/// (see [`reach`]).
pub(crate) fn locate(word: &Word, env: &BashEnv, cwds: &Cwds) -> Result<Vec<PathBuf>, Unproven> {
    let Some(value) = word.value.as_deref() else {
        return Err(Unproven::NotStatic(word.raw.clone()));
    };
    if word.is_process_substitution() {
        return Ok(vec![PathBuf::from(PROCESS_SUBSTITUTION)]);
    }
    let text: Cow<str> = if word.tilde {
        Cow::Owned(expand_tilde(value, env).ok_or_else(|| Unproven::Tilde(value.to_owned()))?)
    } else {
        Cow::Borrowed(value)
    };
    if word.glob && has_glob_before_parent(&text) {
        return Err(Unproven::GlobReachesParent(word.raw.clone()));
    }
    if word.glob {
        return glob_paths(word, env, cwds);
    }
    let path = Path::new(&*text);
    match cwds {
        Cwds::Known(list) => {
            let mut out = Vec::with_capacity(list.len());
            for cwd in list {
                let reached = reach(word, path, Some(cwd), env)?;
                if !out.contains(&reached) {
                    out.push(reached);
                }
            }
            Ok(out)
        }
        // An absolute path needs no working directory, unless it names the command's own
        // (`/proc/self/cwd/…`), which the resolver refuses then.
        Cwds::Unknown if path.is_absolute() => Ok(vec![reach(word, path, None, env)?]),
        Cwds::Unknown => Err(Unproven::RelativeAfterCd(word.raw.clone())),
    }
}

/// Where `path` leads for a command working in `cwd`: the place (a link into a guarded path
/// is that path), a standard stream by its `/dev` name, or a process file by its `/proc`
/// name; a loop of links, or a path relative to a folder not known, is unproven.
pub(crate) fn reach(
    word: &Word,
    path: &Path,
    cwd: Option<&Path>,
    env: &BashEnv,
) -> Result<PathBuf, Unproven> {
    (env.resolve)(path, Frame::Command { cwd })
        .map(tollgate_base::Reached::into_path)
        .map_err(|reason| Unproven::Unresolvable {
            word: word.raw.clone(),
            reason,
        })
}

/// A name inside the workspace whose lookup a link leads out of it: the link (the first
/// part of the name that leads elsewhere, or the name itself when `..` after a link does)
/// and the place outside it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkEscape {
    pub link: PathBuf,
    pub reached: PathBuf,
}

impl std::fmt::Display for LinkEscape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} outside the workspace through the link {}",
            self.reached.display(),
            self.link.display()
        )
    }
}

/// Whether a name `word` gives, taken lexically from the command's working directory, lies
/// inside the workspace while the object its lookup reaches (links followed, dangling ones
/// included) lies outside: the repository's link, not the operator, chose that place. Names
/// outside the workspace as written (`/tmp/x`, `../x`) are the mode's to judge, and a
/// word not known statically is judged elsewhere.
pub(crate) fn escape_through_link(word: &Word, env: &BashEnv, cwds: &Cwds) -> Option<LinkEscape> {
    let value = word.value.as_deref()?;
    if word.is_process_substitution() {
        return None;
    }
    let text: Cow<str> = if word.tilde {
        Cow::Owned(expand_tilde(value, env)?)
    } else {
        Cow::Borrowed(value)
    };
    if word.glob {
        let frames = glob_frames(word, cwds).ok()?;
        return frames.into_iter().find_map(|(dir, cwd)| {
            let list = |dir: &Path| list_reached(dir, cwd, env);
            let found = super::glob::expand(word, &dir, env.home, &list)?;
            found.iter().find_map(|name| escape_of(name, cwd, env))
        });
    }
    let path = Path::new(&*text);
    match cwds {
        Cwds::Known(list) => list.iter().find_map(|cwd| escape_of(path, Some(cwd), env)),
        Cwds::Unknown if path.is_absolute() => escape_of(path, None, env),
        Cwds::Unknown => None,
    }
}

fn escape_of(name: &Path, cwd: Option<&Path>, env: &BashEnv) -> Option<LinkEscape> {
    use tollgate_base::Reached;
    let frame = Frame::Command { cwd };
    let Ok(Reached::Path(lexical)) = tollgate_base::resolve_without_disk(name, frame) else {
        return None;
    };
    if !inside_workspace(&lexical, env) {
        return None;
    }
    let Ok(Reached::Path(reached)) = (env.resolve)(name, frame) else {
        return None;
    };
    if inside_workspace(&reached, env) {
        return None;
    }
    // The workspace's roots hold no link: the first part below one whose lookup leads
    // elsewhere is the link.
    let mut parts: Vec<&Path> = lexical.ancestors().collect();
    parts.reverse();
    let link = parts
        .into_iter()
        .filter(|part| inside_workspace(part, env))
        .find(|part| !matches!((env.resolve)(part, frame), Ok(Reached::Path(ref p)) if p == part))
        .map_or(lexical.clone(), Path::to_path_buf);
    Some(LinkEscape { link, reached })
}

/// The folders a glob word is expanded from, each with the working directory it holds for
/// (`None`: not known; an absolute glob needs none but for `/proc/self/cwd`).
fn glob_frames<'c>(
    word: &Word,
    cwds: &'c Cwds,
) -> Result<Vec<(PathBuf, Option<&'c Path>)>, Unproven> {
    let absolute = word.value.as_deref().is_some_and(|v| v.starts_with('/')) || word.tilde;
    match cwds {
        Cwds::Known(list) if absolute => Ok(list
            .iter()
            .map(|cwd| (PathBuf::from("/"), Some(cwd.as_path())))
            .collect()),
        Cwds::Known(list) => Ok(list
            .iter()
            .map(|cwd| (cwd.clone(), Some(cwd.as_path())))
            .collect()),
        Cwds::Unknown if absolute => Ok(vec![(PathBuf::from("/"), None)]),
        Cwds::Unknown => Err(Unproven::RelativeAfterCd(word.raw.clone())),
    }
}

/// Lists a folder a glob walks as the command would: the folder its lookup reaches, never
/// a process's own (`/proc/self/fd/*`), which cannot be listed here.
fn list_reached(dir: &Path, cwd: Option<&Path>, env: &BashEnv) -> Option<Vec<String>> {
    match (env.resolve)(dir, Frame::Command { cwd }) {
        Ok(tollgate_base::Reached::Path(reached)) => (env.list_dir)(&reached),
        _ => None,
    }
}

/// Every path a glob word reaches from each possible working directory, as the command's
/// lookup reaches it.
fn glob_paths(word: &Word, env: &BashEnv, cwds: &Cwds) -> Result<Vec<PathBuf>, Unproven> {
    let mut out = Vec::new();
    for (dir, cwd) in glob_frames(word, cwds)? {
        let list = |dir: &Path| list_reached(dir, cwd, env);
        let found = super::glob::expand(word, &dir, env.home, &list)
            .ok_or_else(|| Unproven::GlobUnknown(word.raw.clone()))?;
        for path in found {
            let path = reach(word, &path, cwd, env)?;
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// Bash lists every folder a glob word walks through, whatever the command then does with
/// the names, so each listed folder is a read of its names: it must pass the same check as a
/// read of that folder, symlinks resolved (`echo src/o*/s*` through `src/out -> /outside`
/// lists `/outside`, though `echo` reads nothing).
pub(crate) fn check_glob_listing(
    word: &Word,
    env: &BashEnv,
    cwds: &Cwds,
    log: &ReadLog,
) -> Result<(), Unproven> {
    if !word.glob {
        return Ok(());
    }
    let listed = RefCell::new(Vec::new());
    for (dir, cwd) in glob_frames(word, cwds)? {
        let record = |dir: &Path| {
            listed.borrow_mut().push(dir.to_path_buf());
            list_reached(dir, cwd, env)
        };
        super::glob::expand(word, &dir, env.home, &record)
            .ok_or_else(|| Unproven::GlobUnknown(word.raw.clone()))?;
    }
    for dir in listed.into_inner() {
        let Some(text) = dir.to_str() else {
            return Err(Unproven::GlobUnknown(word.raw.clone()));
        };
        check_read(&Word::literal(text), env, cwds, log)?;
    }
    Ok(())
}

fn expand_tilde(value: &str, env: &BashEnv) -> Option<String> {
    let rest = value.strip_prefix('~')?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let home = env.home?;
    Some(format!("{}{}", home.display(), rest))
}

fn has_glob_before_parent(text: &str) -> bool {
    let mut glob_seen = false;
    for comp in text.split('/') {
        // Before Bash 5.2's globskipdots, `.*` also matches `..`.
        if comp.starts_with('.') && comp.contains(['*', '?', '[']) {
            return true;
        }
        if comp == ".." && glob_seen {
            return true;
        }
        if comp.contains(['*', '?', '[', '{']) {
            glob_seen = true;
        }
    }
    false
}

/// The same path, lexically normalised only (for `/dev/…` names Bash treats specially).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    tollgate_base::normalize_lexically(&Path::new("/").join(path))
}

pub(crate) fn inside_workspace(path: &Path, env: &BashEnv) -> bool {
    env.workspace_roots
        .iter()
        .any(|root| tollgate_base::has_prefix(path, root))
}

/// Files that are harmless to read: `/dev/null` ends at once, and the command's own standard
/// streams and a process substitution's pipe are its own data (a located path names a
/// stream by its `/dev` name only, see `base::Reached`).
pub(crate) fn harmless_read(path: &Path) -> bool {
    matches!(
        path.to_str(),
        Some("/dev/null" | "/dev/stdin" | "/dev/stdout" | "/dev/stderr" | PROCESS_SUBSTITUTION)
    )
}

/// Devices that never end: a "read-only" `cat /dev/zero` fills memory or the log.
fn endless_device(path: &Path) -> bool {
    matches!(
        path.to_str(),
        Some("/dev/zero" | "/dev/urandom" | "/dev/random" | "/dev/full")
    )
}

/// The paths the script's readers read, recorded as they are checked (the checks return at
/// the first problem, but what was read before must still reach the caller).
#[derive(Debug, Default)]
pub(crate) struct ReadLog(RefCell<Vec<ReadAccess>>, RefCell<Vec<String>>);

impl ReadLog {
    pub fn record(&self, path: PathBuf, below: bool) {
        let mut list = self.0.borrow_mut();
        // The paths are absolute and normalised: equal bytes are equal paths, and comparing
        // them costs less than comparing components.
        let known = list
            .iter()
            .any(|read| read.below == below && read.path.as_os_str() == path.as_os_str());
        if !known {
            list.push(ReadAccess { path, below });
        }
    }

    /// The reads, and the reads a committed link leads out of the workspace (see
    /// [`note_escape`]).
    pub fn into_parts(self) -> (Vec<ReadAccess>, Vec<String>) {
        (self.0.into_inner(), self.1.into_inner())
    }
}

/// A read whose name is inside the workspace and whose object a committed link puts outside
/// it (`cat src/notes` with `src/notes -> /home/u/.aws/credentials`): the repository's link,
/// not the operator, chose that place, so the read is held as a link escape (a guardrail),
/// as the Read tool refuses it beneath its root.
fn note_escape(word: &Word, env: &BashEnv, cwds: &Cwds, log: &ReadLog) {
    if word.value.is_none() {
        return;
    }
    if let Some(escape) = escape_through_link(word, env, cwds) {
        let why = format!("`{}` reads {escape}", word.raw);
        let mut list = log.1.borrow_mut();
        if !list.contains(&why) {
            list.push(why);
        }
    }
}

/// Where a reader of `word` reads, for the read log: located paths, or for a glob the folder
/// before its first wildcard, read below.
pub(crate) fn log_read(word: &Word, below: bool, env: &BashEnv, cwds: &Cwds, log: &ReadLog) {
    if word.fixed() == Some("-") {
        return;
    }
    note_escape(word, env, cwds, log);
    let Some(value) = word.value.as_deref() else {
        // `cat /proc/$$/environ`, `cat "$f"`: the folder before the expansion, read below
        // (known variables already expanded: `d=/proc; cat $d/$PPID/environ`).
        let template = word.template();
        let cut = template.find(['$', '`']).unwrap_or(template.len());
        let literal: String = template[..cut].to_owned();
        let dir = literal.rsplit_once('/').map_or(".", |(dir, _)| dir);
        let dir = if dir.is_empty() && literal.starts_with('/') {
            "/"
        } else if dir.is_empty() {
            "."
        } else {
            dir
        };
        let mut prefix = Word::literal(dir);
        prefix.tilde = word.tilde;
        record_located(&prefix, true, env, cwds, log);
        return;
    };
    if word.glob {
        // Every match when they can be listed; else the folder before the first wildcard.
        if let Ok(paths) = locate(word, env, cwds) {
            paths.into_iter().for_each(|p| log.record(p, below));
            return;
        }
        let literal: Vec<&str> = value
            .split('/')
            .take_while(|c| !c.contains(['*', '?', '[', '{']))
            .collect();
        let mut prefix = Word::literal(&literal.join("/"));
        prefix.tilde = word.tilde;
        if prefix.value.as_deref() == Some("") {
            prefix = Word::literal(if value.starts_with('/') { "/" } else { "." });
        }
        record_located(&prefix, true, env, cwds, log);
        return;
    }
    record_located(word, below, env, cwds, log);
}

/// Logs the paths `word` names; one that cannot be located (relative after a `cd` to an
/// unknown place, `~` without a home) may be anywhere, so everything is logged as read.
fn record_located(word: &Word, below: bool, env: &BashEnv, cwds: &Cwds, log: &ReadLog) {
    match locate(word, env, cwds) {
        Ok(paths) => paths.into_iter().for_each(|p| log.record(p, below)),
        Err(_) => log.record(PathBuf::from("/"), true),
    }
}

/// Checks that a word names only paths inside the workspace (or a harmless device), and logs
/// what it reads.
pub(crate) fn check_read(
    word: &Word,
    env: &BashEnv,
    cwds: &Cwds,
    log: &ReadLog,
) -> Result<(), Unproven> {
    check_read_below(word, false, env, cwds, log)
}

/// As [`check_read`], for a reader that reads everything below a folder (`grep -r`).
pub(crate) fn check_read_below(
    word: &Word,
    below: bool,
    env: &BashEnv,
    cwds: &Cwds,
    log: &ReadLog,
) -> Result<(), Unproven> {
    if word.fixed() == Some("-") {
        return Ok(());
    }
    note_escape(word, env, cwds, log);
    let located = if word.value.is_none() {
        log_read(word, below, env, cwds, log);
        locate(word, env, cwds)?
    } else if word.glob {
        match locate(word, env, cwds) {
            Ok(paths) => {
                for p in &paths {
                    log.record(p.clone(), below);
                }
                paths
            }
            Err(e) => {
                log_read(word, below, env, cwds, log);
                return Err(e);
            }
        }
    } else {
        let paths =
            locate(word, env, cwds).inspect_err(|_| log.record(PathBuf::from("/"), true))?;
        // Every path is logged, the refused ones too; checked first, so that the paths move
        // into the log rather than being copied there.
        let refusal = paths.iter().find_map(|path| read_refusal(word, path, env));
        for path in paths {
            log.record(path, below);
        }
        return refusal.map_or(Ok(()), Err);
    };
    match located
        .iter()
        .find_map(|path| read_refusal(word, path, env))
    {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

/// Why a reader of `word` may not read `path`: an endless device, or a place outside the
/// workspace that is not a harmless device.
fn read_refusal(word: &Word, path: &Path, env: &BashEnv) -> Option<Unproven> {
    if endless_device(path) {
        return Some(Unproven::EndlessRead {
            word: word.raw.clone(),
            path: path.to_path_buf(),
        });
    }
    if !(inside_workspace(path, env) || harmless_read(path)) {
        return Some(Unproven::ReadsOutside {
            word: word.raw.clone(),
            path: path.to_path_buf(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn with_env<R>(f: impl FnOnce(&BashEnv) -> R) -> R {
        let roots = vec![PathBuf::from("/ws")];
        let env = BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: Some(Path::new("/home/u")),
            resolve: &tollgate_base::resolve_without_disk,
            list_dir: &|_| None,
            links_below: &|_| Ok(Vec::new()),
        };
        f(&env)
    }

    /// Every place a word may name is located in the command's frame: after a `cd` (several
    /// possible folders), `/proc/self/cwd` is each of them, and a working directory not known
    /// makes it unknown too.
    #[test]
    fn the_command_s_own_names_follow_its_working_directory() {
        with_env(|env| {
            let mut cwds = Cwds::new(env.cwd);
            cwds.add(vec![PathBuf::from("/ws/src")]);
            assert_eq!(
                locate(&Word::literal("/proc/self/cwd/.env"), env, &cwds),
                Ok(vec![
                    PathBuf::from("/ws/.env"),
                    PathBuf::from("/ws/src/.env")
                ])
            );
            assert_eq!(
                locate(&Word::literal("/dev/fd/1"), env, &cwds),
                Ok(vec![PathBuf::from("/dev/stdout")])
            );
            assert_eq!(
                locate(&Word::literal("/dev/fd/63"), env, &cwds),
                Ok(vec![PathBuf::from("/proc/self/fd/63")])
            );
            assert!(locate(&Word::literal("/proc/self/cwd/x"), env, &Cwds::Unknown).is_err());
            assert_eq!(
                locate(&Word::literal("/etc/x"), env, &Cwds::Unknown),
                Ok(vec![PathBuf::from("/etc/x")])
            );
        });
    }

    #[test]
    fn tilde_and_relative_paths_are_located() {
        with_env(|env| {
            let cwds = Cwds::new(env.cwd);
            let mut w = Word::literal("~/.bashrc");
            w.tilde = true;
            assert_eq!(
                locate(&w, env, &cwds),
                Ok(vec![PathBuf::from("/home/u/.bashrc")])
            );
            let log = ReadLog::default();
            assert!(check_read(&Word::literal("src/../README.md"), env, &cwds, &log).is_ok());
            assert!(check_read(&Word::literal("../x"), env, &cwds, &log).is_err());
            assert_eq!(
                log.into_parts().0,
                vec![
                    ReadAccess {
                        path: PathBuf::from("/ws/README.md"),
                        below: false
                    },
                    ReadAccess {
                        path: PathBuf::from("/x"),
                        below: false
                    },
                ]
            );
            let mut user = Word::literal("~root/x");
            user.tilde = true;
            assert!(locate(&user, env, &cwds).is_err());
        });
    }
}
