//! Lexical path arithmetic, shared by the policy, the Bash analyser, task files and reports.

use std::path::{Component, Path, PathBuf};

/// Resolves `.` and `..` without touching the filesystem. `..` at the root stays at the root,
/// as the kernel does.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("/");
                }
                if out.as_os_str().is_empty() {
                    out.push("/");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalisation() {
        assert_eq!(
            normalize_lexically(Path::new("/ws/a/../b/./c")),
            PathBuf::from("/ws/b/c")
        );
        assert_eq!(
            normalize_lexically(Path::new("/ws/../../..")),
            PathBuf::from("/")
        );
    }
}
