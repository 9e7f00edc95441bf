//! Which paths a sandboxed command may read and write, as Landlock path-beneath grants.
//! Landlock only allows, and a grant on a folder covers everything beneath it, so "all of
//! `/` except `~/.ssh`" is spelled as grants on every sibling along the way ("carving").

use std::path::{Path, PathBuf};

/// What one grant allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Listing the folder only: an ancestor of a hole (`ls ~` works, `cat ~/.ssh/id` does not).
    ListOnly,
    Read,
    /// Read and write, create and remove.
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: Access,
}

/// Device files every shell needs to write. Not `/dev/shm`: it is shared by every process
/// of the machine and outlives the run (POSIX semaphores and shared memory fail there).
pub const WRITABLE_DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
];

/// What the command may touch, before carving.
#[derive(Debug, Clone, Default)]
pub struct FsScope {
    /// Readable (normally `/`).
    pub read_roots: Vec<PathBuf>,
    /// Writable: the workspace roots, the run's temp folder, `allow_write`, devices.
    pub write_roots: Vec<PathBuf>,
    /// Neither readable nor writable (`deny_read`).
    pub deny_read: Vec<PathBuf>,
    /// Readable, not writable (guardrails and `deny_write`).
    pub deny_write: Vec<PathBuf>,
}

/// The grants for `scope`; `list` names a folder's entries (absent folders list nothing).
pub fn grants(scope: &FsScope, list: &dyn Fn(&Path) -> Vec<PathBuf>) -> Vec<Grant> {
    let mut out = Vec::new();
    for root in &scope.read_roots {
        carve(root, &scope.deny_read, Access::Read, list, &mut out);
    }
    let write_holes: Vec<PathBuf> = scope
        .deny_read
        .iter()
        .chain(&scope.deny_write)
        .cloned()
        .collect();
    for root in &scope.write_roots {
        carve(root, &write_holes, Access::Write, list, &mut out);
    }
    out
}

/// Grants `access` on `root` less the `holes` beneath it. An ancestor of a hole gets
/// `ListOnly`, its other entries the full `access`.
fn carve(
    root: &Path,
    holes: &[PathBuf],
    access: Access,
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
    out: &mut Vec<Grant>,
) {
    let inside: Vec<PathBuf> = holes
        .iter()
        .filter(|hole| hole.starts_with(root))
        .cloned()
        .collect();
    if inside.iter().any(|hole| hole == root) {
        return;
    }
    if inside.is_empty() {
        out.push(Grant {
            path: root.to_path_buf(),
            access,
        });
        return;
    }
    out.push(Grant {
        path: root.to_path_buf(),
        access: Access::ListOnly,
    });
    for child in list(root) {
        carve(&child, &inside, access, list, out);
    }
}

/// A folder's entries on disk; nothing when it cannot be read (or is a file).
pub fn list_dir(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn tree(dir: &Path) -> Vec<PathBuf> {
        let names: &[&str] = match dir.to_str().unwrap_or("") {
            "/" => &["/etc", "/root", "/work"],
            "/root" => &["/root/.ssh", "/root/notes"],
            "/work" => &["/work/ws"],
            "/work/ws" => &["/work/ws/.git", "/work/ws/src", "/work/ws/Cargo.toml"],
            "/work/ws/.git" => &["/work/ws/.git/hooks", "/work/ws/.git/objects"],
            _ => &[],
        };
        names.iter().map(PathBuf::from).collect()
    }

    fn grant(path: &str, access: Access) -> Grant {
        Grant {
            path: PathBuf::from(path),
            access,
        }
    }

    #[test]
    fn holes_are_carved_out_of_reads_and_writes() {
        let ws = PathBuf::from("/work/ws");
        let scope = FsScope {
            read_roots: vec![PathBuf::from("/")],
            write_roots: vec![ws.clone()],
            deny_read: vec![PathBuf::from("/root/.ssh")],
            deny_write: vec![ws.join(".git/hooks"), ws.join(".tollgate")],
        };
        let table = [
            grant("/", Access::ListOnly),
            grant("/etc", Access::Read),
            grant("/root", Access::ListOnly),
            grant("/root/notes", Access::Read),
            grant("/work", Access::Read),
            grant("/work/ws", Access::ListOnly),
            grant("/work/ws/.git", Access::ListOnly),
            grant("/work/ws/.git/objects", Access::Write),
            grant("/work/ws/src", Access::Write),
            grant("/work/ws/Cargo.toml", Access::Write),
        ];
        assert_eq!(grants(&scope, &tree), table);
    }

    #[test]
    fn a_hole_that_is_the_root_grants_nothing_and_no_hole_grants_the_root() {
        let scope = FsScope {
            read_roots: vec![PathBuf::from("/root/.ssh"), PathBuf::from("/etc")],
            deny_read: vec![PathBuf::from("/root/.ssh")],
            ..FsScope::default()
        };
        assert_eq!(grants(&scope, &tree), [grant("/etc", Access::Read)]);
    }
}
