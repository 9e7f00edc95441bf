//! Resolving a path a model gave to what it really names on disk: absolute, lexically
//! normalised, and with every symlink in its existing part resolved, before any check.

use std::path::{Path, PathBuf};

use crate::base::normalize_lexically;
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
    let workspace = ctx.workspace;
    let path = resolve_path(raw, &workspace.workdir, workspace.home.as_deref());
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

/// `raw` is absolute or relative to `workdir`; `~/` expands to `home`. Symlinks in the part
/// that exists are resolved, so a link inside the workspace pointing out of it is seen.
pub fn resolve_path(raw: &str, workdir: &Path, home: Option<&Path>) -> PathBuf {
    let joined = match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => workdir.join(raw),
    };
    resolve_symlinks_below(&normalize_lexically(&joined), &[workdir])
}

/// [`resolve_symlinks`] for a path that may lie below folders known to be canonical (the
/// workspace's roots, canonical from the run's start): only the components under the root are
/// looked at, one `lstat` each, instead of a `readlink` for every component from `/` — the
/// gate resolves a path for nearly every call it decides.
pub fn resolve_symlinks_below<P: AsRef<Path>>(normal: &Path, canonical: &[P]) -> PathBuf {
    let below = canonical
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|root| Some((root, normal.strip_prefix(root).ok()?)))
        .max_by_key(|(root, _)| root.as_os_str().len());
    let Some((root, rest)) = below else {
        return resolve_symlinks(normal);
    };
    let mut resolved = root.to_path_buf();
    let mut components = rest.components();
    for component in components.by_ref() {
        resolved.push(component);
        match std::fs::symlink_metadata(&resolved) {
            Ok(meta) if meta.file_type().is_symlink() => match resolved.canonicalize() {
                Ok(real) => resolved = real,
                // A dangling link names nothing yet: kept as written, like any missing part.
                Err(_) => break,
            },
            Ok(_) => {}
            Err(_) => break,
        }
    }
    resolved.extend(components);
    resolved
}

/// Resolves the symlinks in the existing part of an absolute, normalised path; the part
/// that does not exist yet is kept as written.
pub fn resolve_symlinks(normal: &Path) -> PathBuf {
    let mut existing = normal;
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut resolved = real;
            resolved.extend(tail.iter().rev());
            return resolved;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                existing = parent;
            }
            _ => return normal.to_path_buf(),
        }
    }
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

    /// Below a canonical root the walk gives what a full resolution gives: links in and out
    /// of the root, chains of links, dangling links, files used as folders, missing parts.
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
                resolve_symlinks_below(&path, &[&root]),
                resolve_symlinks(&path),
                "{relative}"
            );
        }
        let outside = Path::new("/etc/hosts");
        assert_eq!(
            resolve_symlinks_below(outside, &[&root]),
            resolve_symlinks(outside)
        );
    }
}
