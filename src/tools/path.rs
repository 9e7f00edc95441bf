//! Resolving a path a model gave to what it really names on disk: absolute, lexically
//! normalised, and with every symlink in its existing part resolved, before any check. Work
//! is linear in the path's length, and paths no system call could take are refused first.

use std::path::{Path, PathBuf};

use crate::policy::{
    Access, AskCause, PermissionContext, ToolCheck, ToolName, check_path, git_dir_write,
    normalize_lexically,
};

/// A file tool's permission check: resolve the path as the call would, then the policy's
/// path check.
pub fn check_file_access(
    ctx: &PermissionContext,
    tool: &ToolName,
    raw: &str,
    access: Access,
) -> ToolCheck {
    if let Err(reason) = path_shape(raw) {
        return ToolCheck::Deny { reason, rule: None };
    }
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

/// Linux's PATH_MAX: no system call takes a longer path, so no tool could use one.
pub const MAX_PATH_BYTES: usize = 4096;

/// More parts than any real tree has; a deeper path is a generated one.
pub const MAX_PATH_DEPTH: usize = 256;

/// A path too long or too deep to name a file, refused with a sentence before any work.
fn path_shape(raw: &str) -> Result<(), String> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(format!(
            "the path is {} bytes long, over the {MAX_PATH_BYTES}-byte limit",
            raw.len()
        ));
    }
    let depth = raw.split('/').filter(|part| !part.is_empty()).count();
    if depth > MAX_PATH_DEPTH {
        return Err(format!(
            "the path has {depth} parts, over the {MAX_PATH_DEPTH}-part limit"
        ));
    }
    Ok(())
}

/// `raw` is absolute or relative to `workdir`; `~/` expands to `home`. Symlinks in the part
/// that exists are resolved, so a link inside the workspace pointing out of it is seen.
pub fn resolve_path(raw: &str, workdir: &Path, home: Option<&Path>) -> PathBuf {
    let joined = match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => workdir.join(raw),
    };
    resolve_symlinks(&normalize_lexically(&joined))
}

/// Resolves the symlinks in the existing part of an absolute, normalised path; the part
/// that does not exist yet is kept as written. Walked forward, one part at a time from the
/// already-resolved prefix, so each system call sees at most a real path's length and the
/// rest is appended once: linear, however many parts follow the first missing one.
pub fn resolve_symlinks(normal: &Path) -> PathBuf {
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
    if resolved.as_os_str().is_empty() {
        return normal.to_path_buf();
    }
    resolved.extend(rest);
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
        assert_eq!(
            path_shape(&"a/".repeat(500_000)),
            Err("the path is 1000000 bytes long, over the 4096-byte limit".into())
        );
        assert_eq!(
            path_shape(&"a/".repeat(300)),
            Err("the path has 300 parts, over the 256-part limit".into())
        );
        assert_eq!(path_shape("src//lib.rs"), Ok(()));
    }
}
