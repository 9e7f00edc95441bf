//! Resolving a path a file tool was given to what it really names on disk, in tollgate's own
//! process (the tools run in it), before any check: absolute, every link followed (dangling
//! ones too, so a write through one is judged as a write of its target), `..` taken on the
//! folder reached (see `base::resolve`). A process's own files (`/proc/self/…`, `/dev/fd/…`)
//! are never looked up in tollgate's process: they are checked as the `/proc` names they are,
//! which the guardrails refuse. Work is linear in the path's length, and paths no system call
//! could take are refused first.

use std::path::{Path, PathBuf};

use crate::base::{DiskView, Frame, Unresolvable, normalize_lexically, resolve};
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
    check_file_access_keeping(ctx, tool, raw, access, |_| {})
}

/// [`check_file_access`], handing the resolved path it judges to `keep`: a file tool keeps it
/// for its run, which then acts on that very path (`place::Judged`).
pub fn check_file_access_keeping(
    ctx: &PermissionContext,
    tool: &ToolName,
    raw: &str,
    access: Access,
    keep: impl FnOnce(&Path),
) -> ToolCheck {
    if let Err(shape) = path_shape(raw) {
        return ToolCheck::Deny {
            reason: shape.to_string(),
            rule: None,
        };
    }
    let workspace = ctx.workspace;
    let path = match reach(
        raw,
        &workspace.workdir,
        workspace.home.as_deref(),
        &workspace.roots,
        ctx.disk,
    ) {
        Ok(path) => path,
        Err(unresolvable) => {
            return ToolCheck::Deny {
                reason: format!("{tool} of {raw}: {unresolvable}"),
                rule: None,
            };
        }
    };
    // A stream of decisions (`check --calls`) runs nothing: nothing to keep.
    if ctx.disk.is_none() {
        keep(&path);
    }
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

/// `raw` is absolute or relative to `workdir`; `~/` expands to `home`. Where the tool acts:
/// every link followed, dangling ones included, so a link inside the workspace pointing out
/// of it is seen. A path that leads nowhere nameable (a loop of links) is kept as written;
/// [`check_file_access`] has refused it.
pub fn resolve_path(raw: &str, workdir: &Path, home: Option<&Path>) -> PathBuf {
    reach(raw, workdir, home, &[workdir], None)
        .unwrap_or_else(|_| normalize_lexically(&joined(raw, workdir, home)))
}

/// `raw` made absolute: `~/` from `home`, anything else from `workdir`.
fn joined(raw: &str, workdir: &Path, home: Option<&Path>) -> PathBuf {
    match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => workdir.join(raw),
    }
}

/// Where `raw` leads in tollgate's process, checked as a path (a process file by its `/proc`
/// name); `canonical` are folders known to hold no link.
fn reach(
    raw: &str,
    workdir: &Path,
    home: Option<&Path>,
    canonical: &[impl AsRef<Path>],
    disk: Option<&DiskView>,
) -> Result<PathBuf, Unresolvable> {
    resolve(&joined(raw, workdir, home), Frame::Tool, canonical, disk).map(|r| r.into_path())
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

/// Where an absolute path leads in tollgate's process (see [`resolve_path`]); a path that
/// leads nowhere nameable is kept as given.
pub fn resolve_symlinks(normal: &Path) -> PathBuf {
    resolve(normal, Frame::Tool, &[] as &[&Path], None)
        .map_or_else(|_| normal.to_path_buf(), |r| r.into_path())
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
    /// in and out of the root, chains of links, files used as folders, missing parts; a
    /// dangling link leads on to its target, where `realpath` stops.
    #[test]
    fn resolving_below_a_root_agrees_with_a_full_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/file.rs"), "").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("src/deep", root.join("inner")).unwrap();
        std::os::unix::fs::symlink("inner", root.join("chain")).unwrap();
        std::os::unix::fs::symlink("../../src/../escape", root.join("src/deep/back")).unwrap();
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
            "missing/also/missing",
        ] {
            let path = if relative.is_empty() {
                root.clone()
            } else {
                root.join(relative)
            };
            let below = resolve(&path, Frame::Tool, &[&root], None).map(|r| r.into_path());
            assert_eq!(below, Ok(by_realpath(&path)), "{relative}");
            assert_eq!(resolve_symlinks(&path), by_realpath(&path), "{relative}");
        }
        assert_eq!(
            resolve_symlinks(&root.join("dangling/x")),
            root.join("nowhere/x")
        );
        for outside in ["/etc/hosts", "/usr/include/missing/x.h", "/"] {
            let outside = Path::new(outside);
            let below = resolve(outside, Frame::Tool, &[&root], None).map(|r| r.into_path());
            assert_eq!(below, Ok(by_realpath(outside)));
        }
    }

    /// The file tools judge what a link reaches: a dangling link by its target, a link into a
    /// guarded path as that path, a process's own files by their `/proc` names (refused, never
    /// looked up in tollgate's process), in every mode.
    #[test]
    fn file_tools_judge_the_object_a_link_reaches() {
        use crate::policy::{PermissionMode, RuleSet, Workspace};
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let root = top.join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        let link = |target: &str, name: &str| {
            let target = target.replace('@', &top.display().to_string());
            std::os::unix::fs::symlink(target, root.join(name)).unwrap();
        };
        link("../.git/commondir", "src/gc");
        link("../.git/hooks/pre-commit", "src/hook");
        link("../.npmrc", "src/npmrc");
        link("@/outside/X", "src/dang");
        link("../.git", "src/mid");
        link("loop", "src/loop");
        let rules = RuleSet::default();
        let workspace = Workspace::new(root.clone(), vec![], None);
        let kind = |check: ToolCheck| match check {
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask {
                cause: AskCause::Guardrail(_),
                ..
            } => "guardrail",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Passthrough { .. } => "passthrough",
        };
        for mode in [
            PermissionMode::DontAsk,
            PermissionMode::AcceptEdits,
            PermissionMode::BypassPermissions,
            PermissionMode::Auto,
        ] {
            let ctx = PermissionContext {
                mode,
                rules: &rules,
                workspace: &workspace,
                disk: None,
                auto_allow_bash: false,
            };
            let write = |raw: &str| {
                kind(check_file_access(
                    &ctx,
                    &ToolName::Write,
                    raw,
                    Access::Write,
                ))
            };
            let read =
                |raw: &str| kind(check_file_access(&ctx, &ToolName::Read, raw, Access::Read));
            for guarded in ["src/gc", "src/hook", "src/npmrc", "src/mid/config"] {
                assert_eq!(write(guarded), "guardrail", "{guarded} in {mode:?}");
            }
            assert_eq!(write("src/dang"), "deny", "{mode:?}");
            assert_eq!(write("src/loop"), "deny", "{mode:?}");
            for process in [
                "/proc/self/cwd/x",
                "/dev/stdout",
                "/dev/fd/1",
                "/proc/1/cwd/x",
            ] {
                assert_eq!(read(process), "guardrail", "{process} in {mode:?}");
                assert_eq!(write(process), "guardrail", "{process} in {mode:?}");
            }
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
