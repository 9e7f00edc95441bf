//! Where a path word points: tilde, working directory (which `cd` may have changed), `..`
//! through symlinks (via the injected resolver), and whether it stays inside the workspace.

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::{Component, Path, PathBuf};

use super::unproven::Unproven;
use super::word::Word;
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

/// The absolute, normalised, symlink-resolved paths a word may name (one per possible cwd).
pub(crate) fn locate(word: &Word, env: &BashEnv, cwds: &Cwds) -> Result<Vec<PathBuf>, Unproven> {
    let Some(value) = word.value.as_deref() else {
        return Err(Unproven::NotStatic(word.raw.clone()));
    };
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
    if path.is_absolute() {
        return Ok(vec![normalise(path, env)]);
    }
    match cwds {
        Cwds::Known(list) => Ok(list.iter().map(|c| normalise(&c.join(path), env)).collect()),
        Cwds::Unknown => Err(Unproven::RelativeAfterCd(word.raw.clone())),
    }
}

/// Every path a glob word reaches from each possible working directory, symlinks resolved.
fn glob_paths(word: &Word, env: &BashEnv, cwds: &Cwds) -> Result<Vec<PathBuf>, Unproven> {
    let absolute = word.value.as_deref().is_some_and(|v| v.starts_with('/')) || word.tilde;
    let dirs: Vec<PathBuf> = match cwds {
        _ if absolute => vec![PathBuf::from("/")],
        Cwds::Known(list) => list.clone(),
        Cwds::Unknown => return Err(Unproven::RelativeAfterCd(word.raw.clone())),
    };
    let mut out = Vec::new();
    for dir in dirs {
        let found = super::glob::expand(word, &dir, env.home, env.list_dir)
            .ok_or_else(|| Unproven::GlobUnknown(word.raw.clone()))?;
        for path in found {
            let path = normalise(&path, env);
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
    let absolute = word.value.as_deref().is_some_and(|v| v.starts_with('/')) || word.tilde;
    let dirs: Vec<PathBuf> = match cwds {
        _ if absolute => vec![PathBuf::from("/")],
        Cwds::Known(list) => list.clone(),
        Cwds::Unknown => return Err(Unproven::RelativeAfterCd(word.raw.clone())),
    };
    let listed = RefCell::new(Vec::new());
    let record = |dir: &Path| {
        listed.borrow_mut().push(dir.to_path_buf());
        (env.list_dir)(dir)
    };
    for dir in dirs {
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

/// Lexical normalisation, except that `..` is applied to the resolved directory: in Bash
/// `link/..` is the parent of the link's target, not the directory holding the link.
pub(crate) fn normalise(path: &Path, env: &BashEnv) -> PathBuf {
    // What the component walk would rebuild unchanged (most paths a decision locates).
    if crate::base::is_normal_absolute(path) {
        return (env.resolve)(path);
    }
    let mut out = PathBuf::from("/");
    for comp in path.components() {
        match comp {
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out = (env.resolve)(&out);
                out.pop();
            }
            Component::Normal(c) => out.push(c),
        }
    }
    (env.resolve)(&out)
}

/// The same path, lexically normalised only (for `/dev/…` names Bash treats specially).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    crate::base::normalize_lexically(&Path::new("/").join(path))
}

pub(crate) fn inside_workspace(path: &Path, env: &BashEnv) -> bool {
    env.workspace_roots
        .iter()
        .any(|root| crate::base::has_prefix(path, root))
}

/// Device files that are harmless to read (they end at once).
pub(crate) fn harmless_read(path: &Path) -> bool {
    path.starts_with("/dev/fd") || matches!(path.to_str(), Some("/dev/null" | "/dev/stdin"))
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
pub(crate) struct ReadLog(RefCell<Vec<ReadAccess>>);

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

    pub fn into_inner(self) -> Vec<ReadAccess> {
        self.0.into_inner()
    }
}

/// Where a reader of `word` reads, for the read log: located paths, or for a glob the folder
/// before its first wildcard, read below.
pub(crate) fn log_read(word: &Word, below: bool, env: &BashEnv, cwds: &Cwds, log: &ReadLog) {
    if word.fixed() == Some("-") {
        return;
    }
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
        let resolve = |p: &Path| {
            // A symlink /ws/link -> /etc, to see `..` taken physically.
            match p.strip_prefix("/ws/link") {
                Ok(rest) => Path::new("/etc").join(rest),
                Err(_) => p.to_path_buf(),
            }
        };
        let env = BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: Some(Path::new("/home/u")),
            resolve: &resolve,
            list_dir: &|_| None,
        };
        f(&env)
    }

    #[test]
    fn parent_of_a_symlink_is_taken_physically() {
        with_env(|env| {
            assert_eq!(
                normalise(Path::new("/ws/link/../passwd"), env),
                PathBuf::from("/passwd")
            );
            assert_eq!(
                normalise(Path::new("/ws/a/../b"), env),
                PathBuf::from("/ws/b")
            );
        });
    }

    #[test]
    fn paths_already_normal_resolve_as_the_component_walk_does() {
        with_env(|env| {
            // Normal ones take the short way (`base::path` tests which those are), the others
            // the walk; through the symlink /ws/link -> /etc as well.
            for path in [
                "/ws/a/b",
                "/",
                "/ws/a/",
                "/ws/link/x",
                "/ws/link/../x",
                "ws/a",
            ] {
                // A trailing `/.` changes nothing but takes the component walk.
                let walked = normalise(&Path::new(path).join("."), env);
                assert_eq!(normalise(Path::new(path), env), walked, "{path}");
            }
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
                log.into_inner(),
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
