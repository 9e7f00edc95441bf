//! Resolving a path a model gave to what it really names on disk: absolute, lexically
//! normalised, and with every symlink in its existing part resolved, before any check.

use std::path::{Path, PathBuf};

use crate::base::normalize_lexically;
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName, check_path};

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
    check_path(ctx, tool, &path, access)
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
}
