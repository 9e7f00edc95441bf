//! The file walk Glob and Grep share: gitignore-aware (also outside a git repository),
//! dotfiles included but never `.git/`, sorted so results are stable.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// Every file below `base` (or `base` itself if it is a file), sorted by path.
pub fn files_under(base: &Path) -> Vec<PathBuf> {
    if base.is_file() {
        return vec![base.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = WalkBuilder::new(base)
        .hidden(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .map(ignore::DirEntry::into_path)
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_gitignore_and_skips_dot_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in [
            "b.rs",
            "a.rs",
            "target/x.rs",
            ".git/config",
            ".github/ci.yml",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let found: Vec<String> = files_under(root)
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(found, [".github/ci.yml", ".gitignore", "a.rs", "b.rs"]);
    }
}
