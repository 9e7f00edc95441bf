//! Resolving a path a model gave to what it really names on disk: absolute, lexically
//! normalised, and with every symlink in its existing part resolved, before any check. Work
//! is linear in the path's length, and paths no system call could take are refused first.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::base::{DiskView, Seen, look_now, normalize_lexically};
use crate::policy::{
    Access, AskCause, PermissionContext, ToolCheck, ToolName, check_path, git_dir_write,
};

/// A file tool's permission check: resolve the path as the call would, then the policy's
/// path check.
pub fn check_file_access(
    ctx: &PermissionContext,
    tool: &ToolName,
    raw: &str,
    access: Access,
) -> ToolCheck {
    if let Err(shape) = path_shape(raw) {
        return ToolCheck::Deny {
            reason: shape.to_string(),
            rule: None,
        };
    }
    let workspace = ctx.workspace;
    let path = resolve_path_in(raw, &workspace.workdir, workspace.home.as_deref(), ctx.disk);
    match access {
        Access::Write => check_write(ctx, tool, &path),
        Access::Read => check_path(ctx, tool, &path, access),
    }
}

/// The policy's check of a write to a resolved path, plus the one guardrail that needs the
/// disk: a folder on the way that already holds a `HEAD` is a git directory.
pub fn check_write(ctx: &PermissionContext, tool: &ToolName, path: &Path) -> ToolCheck {
    let check = check_path(ctx, tool, path, Access::Write);
    if matches!(check, ToolCheck::Deny { .. }) {
        return check;
    }
    let holds_head = |dir: &Path| dir.join("HEAD").is_file();
    match git_dir_write(path, &holds_head) {
        Some(guardrail) => ToolCheck::Ask {
            reason: format!(
                "{tool} of {} trips a safety guardrail: {guardrail}",
                path.display()
            ),
            cause: AskCause::Guardrail(guardrail),
        },
        None => check,
    }
}

/// Linux's PATH_MAX: no system call takes a longer path, so no tool could use one.
pub const MAX_PATH_BYTES: usize = 4096;

/// More parts than any real tree has; a deeper path is a generated one.
pub const MAX_PATH_DEPTH: usize = 256;

/// A path no system call could take; the text is the refusal's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum PathShape {
    #[error("the path is {0} bytes long, over the {MAX_PATH_BYTES}-byte limit")]
    TooLong(usize),
    #[error("the path has {0} parts, over the {MAX_PATH_DEPTH}-part limit")]
    TooDeep(usize),
}

/// A path too long or too deep to name a file, refused with a sentence before any work.
fn path_shape(raw: &str) -> Result<(), PathShape> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathShape::TooLong(raw.len()));
    }
    let depth = raw.split('/').filter(|part| !part.is_empty()).count();
    if depth > MAX_PATH_DEPTH {
        return Err(PathShape::TooDeep(depth));
    }
    Ok(())
}

/// `raw` is absolute or relative to `workdir`; `~/` expands to `home`. Symlinks in the part
/// that exists are resolved, so a link inside the workspace pointing out of it is seen.
pub fn resolve_path(raw: &str, workdir: &Path, home: Option<&Path>) -> PathBuf {
    resolve_path_in(raw, workdir, home, None)
}

/// [`resolve_path`] against a stream's view of the disk when there is one.
fn resolve_path_in(
    raw: &str,
    workdir: &Path,
    home: Option<&Path>,
    disk: Option<&DiskView>,
) -> PathBuf {
    let joined = match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => workdir.join(raw),
    };
    resolve_symlinks_below(&normalize_lexically(&joined), &[workdir], disk)
}

/// How a tool's result names `path`: relative to the workdir when inside it, so it reads as
/// the model may pass it back (relative paths resolve against the workdir) and costs no
/// repeated prefix; absolute otherwise, and for the workdir itself.
pub fn shown(path: &Path, workdir: &Path) -> String {
    match path.strip_prefix(workdir) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// [`resolve_symlinks`] for a path that may lie below folders known to be canonical (the
/// workspace's roots, canonical from the run's start): only the components under the root are
/// looked at — the gate resolves a path for nearly every call it decides.
///
/// With a stream's view of the disk (`disk`), a walk's components are answered from the view.
pub fn resolve_symlinks_below<P: AsRef<Path>>(
    normal: &Path,
    canonical: &[P],
    disk: Option<&DiskView>,
) -> PathBuf {
    let below = canonical
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|root| Some((root, crate::base::strip_prefix(normal, root)?)))
        .max_by_key(|(root, _)| root.as_os_str().len());
    match below {
        Some((root, rest)) => walk(root, rest, disk),
        None => match normal.strip_prefix("/") {
            Ok(rest) => walk(Path::new("/"), rest, disk),
            Err(_) => normal.to_path_buf(),
        },
    }
}

/// Resolves the symlinks in the existing part of an absolute, normalised path; the part
/// that does not exist yet is kept as written. Walked forward from `/`, one `lstat` per
/// component, and only a component that is a link is resolved in full (`realpath`): linear
/// in the path's length, however many parts follow the first missing one.
pub fn resolve_symlinks(normal: &Path) -> PathBuf {
    match normal.strip_prefix("/") {
        Ok(rest) => walk(Path::new("/"), rest, None),
        Err(_) => normal.to_path_buf(),
    }
}

/// `root` (canonical) joined with `rest`, each component checked with one `lstat` and a link
/// resolved where one is met; the walk stops at the first component that does not exist.
fn walk(root: &Path, rest: &Path, disk: Option<&DiskView>) -> PathBuf {
    // Room for the whole path at once: a push past the capacity copies it again.
    let mut resolved = PathBuf::with_capacity(root.as_os_str().len() + 1 + rest.as_os_str().len());
    resolved.push(root);
    let bytes = rest.as_os_str().as_bytes();
    // The names of a plain relative rest (nearly every one: it is cut from a normal path)
    // are its `/`-separated bytes; anything else is taken apart as components.
    let plain = !bytes.is_empty()
        && bytes
            .split(|&b| b == b'/')
            .all(|name| !matches!(name, b"" | b"." | b".."));
    if plain {
        walk_names(
            resolved,
            bytes.split(|&b| b == b'/').map(OsStr::from_bytes),
            disk,
        )
    } else {
        walk_names(resolved, rest.components().map(|c| c.as_os_str()), disk)
    }
}

/// [`walk`] over the names of the rest, from `resolved` (the root).
fn walk_names<'n>(
    mut resolved: PathBuf,
    mut names: impl Iterator<Item = &'n OsStr>,
    disk: Option<&DiskView>,
) -> PathBuf {
    for name in names.by_ref() {
        resolved.push(name);
        let seen = match disk {
            Some(disk) => disk.look(&resolved),
            None => look_now(&resolved),
        };
        match seen {
            Seen::Link(Some(real)) => resolved = real,
            // A dangling link names nothing yet: kept as written, like any missing part.
            Seen::Link(None) | Seen::Missing => break,
            Seen::Entry => {}
        }
    }
    resolved.extend(names);
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_missing_and_symlinked_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
        assert_eq!(
            resolve_path("src/new/a.rs", &root, None),
            root.join("src/new/a.rs")
        );
        assert_eq!(
            resolve_path("../x", &root.join("src"), None),
            root.join("x")
        );
        let etc = Path::new("/etc").canonicalize().unwrap();
        assert_eq!(
            resolve_path("escape/passwd", &root, None),
            etc.join("passwd")
        );
        assert_eq!(
            resolve_path("~/.bashrc", &root, Some(Path::new("/home/u"))),
            PathBuf::from("/home/u/.bashrc")
        );
    }

    /// What `realpath` gives for the longest prefix that exists, the rest kept as written:
    /// the resolution the walks must agree with.
    fn by_realpath(normal: &Path) -> PathBuf {
        let mut resolved = PathBuf::new();
        let mut rest = normal.components();
        while let Some(part) = rest.clone().next() {
            match resolved.join(part).canonicalize() {
                Ok(real) => {
                    resolved = real;
                    rest.next();
                }
                Err(_) => break,
            }
        }
        resolved.extend(rest);
        resolved
    }

    /// Below a canonical root and from `/`, the walk gives what a full resolution gives: links
    /// in and out of the root, chains of links, dangling links, files used as folders,
    /// missing parts.
    #[test]
    fn resolving_below_a_root_agrees_with_a_full_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/file.rs"), "").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("src/deep", root.join("inner")).unwrap();
        std::os::unix::fs::symlink("inner", root.join("chain")).unwrap();
        std::os::unix::fs::symlink("../src/../escape", root.join("src/deep/back")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
        for relative in [
            "",
            "src",
            "src/file.rs",
            "src/file.rs/x",
            "src/new/a.rs",
            "escape/passwd",
            "inner/x.rs",
            "chain/x/y",
            "src/deep/back/hosts",
            "dangling/x",
            "missing/also/missing",
        ] {
            let path = if relative.is_empty() {
                root.clone()
            } else {
                root.join(relative)
            };
            assert_eq!(
                resolve_symlinks_below(&path, &[&root], None),
                by_realpath(&path),
                "{relative}"
            );
            assert_eq!(resolve_symlinks(&path), by_realpath(&path), "{relative}");
        }
        for outside in [
            "/etc/hosts",
            "/usr/include/missing/x.h",
            "/proc/self/cwd",
            "/",
        ] {
            let outside = Path::new(outside);
            assert_eq!(
                resolve_symlinks_below(outside, &[&root], None),
                by_realpath(outside)
            );
        }
    }

    #[test]
    fn a_megabyte_of_missing_parts_is_kept_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let raw = "a/".repeat(500_000);
        let resolved = resolve_path(&raw, &root, None);
        assert_eq!(resolved, root.join(raw.trim_end_matches('/')));
    }

    #[test]
    fn paths_no_system_call_could_take_are_refused_with_a_sentence() {
        let reason = |raw: &str| path_shape(raw).map_err(|shape| shape.to_string());
        assert_eq!(
            reason(&"a/".repeat(500_000)),
            Err("the path is 1000000 bytes long, over the 4096-byte limit".into())
        );
        assert_eq!(
            reason(&"a/".repeat(300)),
            Err("the path has 300 parts, over the 256-part limit".into())
        );
        assert_eq!(path_shape("src//lib.rs"), Ok(()));
    }
}
