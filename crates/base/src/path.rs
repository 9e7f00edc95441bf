//! Lexical path arithmetic, shared by the policy, the Bash analyser, task files and reports.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Resolves `.` and `..` without touching the filesystem. `..` at the root stays at the root,
/// as the kernel does.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    if is_normal_absolute(path) {
        return path.to_path_buf();
    }
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

/// `path` without the leading `prefix`, compared component by component as
/// [`Path::strip_prefix`] does. The gate asks this of nearly every path it checks, and paths
/// there are absolute and normal: for those the bytes are compared directly (the component
/// walk costs more than the rest of the check); anything else takes the component walk.
pub fn strip_prefix<'p>(path: &'p Path, prefix: &Path) -> Option<&'p Path> {
    let (bytes, head) = (path.as_os_str().as_bytes(), prefix.as_os_str().as_bytes());
    if !(plain(bytes) && plain(head)) {
        return path.strip_prefix(prefix).ok();
    }
    let rest = bytes.strip_prefix(head)?;
    let rest = if head == b"/" || rest.is_empty() {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    Some(Path::new(std::ffi::OsStr::from_bytes(rest)))
}

/// `path`'s parent and last name, as [`Path::parent`] and [`Path::file_name`] say them; for a
/// plain absolute path (see [`strip_prefix`]) found by one byte search rather than by parsing
/// components from the back. `None` where either is.
pub fn parent_and_name(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    let bytes = path.as_os_str().as_bytes();
    if !plain(bytes) {
        return Some((path.parent()?, path.file_name()?));
    }
    let slash = bytes.iter().rposition(|&b| b == b'/')?;
    let name = &bytes[slash + 1..];
    if name.is_empty() || name == b".." {
        return None;
    }
    let parent = if slash == 0 {
        &b"/"[..]
    } else {
        &bytes[..slash]
    };
    Some((
        Path::new(std::ffi::OsStr::from_bytes(parent)),
        std::ffi::OsStr::from_bytes(name),
    ))
}

/// Whether `path` starts with `prefix`, component by component (see [`strip_prefix`]).
pub fn has_prefix(path: &Path, prefix: &Path) -> bool {
    strip_prefix(path, prefix).is_some()
}

/// Absolute, without `//`, a `.` part or a trailing `/` (`/` itself excepted): a path whose
/// components are its `/`-separated bytes.
fn plain(bytes: &[u8]) -> bool {
    absolute_with_parts(bytes, |part| !matches!(part, b"" | b"."))
}

/// [`plain`] and without a `..` part: what lexical normalisation returns unchanged (most
/// paths the gate checks).
pub fn is_normal_absolute(path: &Path) -> bool {
    absolute_with_parts(path.as_os_str().as_bytes(), |part| {
        !matches!(part, b"" | b"." | b"..")
    })
}

/// `/`, or an absolute path each of whose `/`-separated parts is `allowed`.
fn absolute_with_parts(bytes: &[u8], allowed: impl Fn(&[u8]) -> bool) -> bool {
    bytes == b"/"
        || (bytes.first() == Some(&b'/') && bytes.split(|&b| b == b'/').skip(1).all(allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_and_name_agree_with_the_component_walk() {
        for path in [
            "/", "/a", "/a/b", "/a/b/", "/a/./b", "/a/..", "/a/../b", "//a", "a/b", "a", "",
            "/a/.", "/.hidden", "/a b/c d",
        ] {
            let path = Path::new(path);
            let walked = path.parent().zip(path.file_name());
            assert_eq!(parent_and_name(path), walked, "{}", path.display());
        }
    }

    /// The byte comparison answers as the component walk does, on normal paths and others.
    #[test]
    fn prefixes_agree_with_the_component_walk() {
        let paths = [
            "/",
            "/a",
            "/a/",
            "/a/b",
            "/ab",
            "/a/b/",
            "//a",
            "/a//b",
            "/a/./b",
            "/a/..",
            "a",
            "a/b",
            "",
            "/a/b/c",
            "/proc",
            "/proc/1/environ",
            "/procx",
        ];
        for path in paths {
            for prefix in paths {
                let (path, prefix) = (Path::new(path), Path::new(prefix));
                assert_eq!(
                    strip_prefix(path, prefix),
                    path.strip_prefix(prefix).ok(),
                    "{path:?} {prefix:?}"
                );
            }
        }
    }

    #[test]
    fn normal_paths_are_returned_as_they_are() {
        for (path, normal) in [
            ("/ws/a/b", true),
            ("/", true),
            ("/ws/a/", false),
            ("/ws//a", false),
            ("/ws/./a", false),
            ("/ws/a/..", false),
            ("/ws/..a/.b", true),
            ("ws/a", false),
        ] {
            assert_eq!(is_normal_absolute(Path::new(path)), normal, "{path}");
            // A trailing `/.` changes nothing but takes the component walk.
            let walked = normalize_lexically(&Path::new(path).join("."));
            assert_eq!(normalize_lexically(Path::new(path)), walked, "{path}");
        }
    }

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
