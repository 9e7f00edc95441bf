//! Safety guardrails no configuration can turn off (step 1g): writes to version control,
//! tollgate's and Claude Code's own config, CI workflows, shell start-up files and keys, and
//! reads of process environments.

use std::path::{Component, Path};

/// Folder names whose contents are never written by a tool call.
const PROTECTED_DIRS: [&str; 3] = [".git", ".tollgate", ".claude"];

/// File names never written: shell start-up files and tool configs that run code.
const PROTECTED_FILES: [&str; 13] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".kshrc",
    ".gitconfig",
    ".mcp.json",
    ".gitmodules",
];

/// The guardrail a write to `path` (absolute, resolved) trips, if any.
pub fn write_guardrail(path: &Path, home: Option<&Path>) -> Option<&'static str> {
    let names: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    if let Some(dir) = PROTECTED_DIRS
        .iter()
        .find(|dir| names.iter().any(|name| name == *dir))
    {
        return Some(match *dir {
            ".git" => "writes under .git/ (hooks and config run code)",
            ".tollgate" => "writes under .tollgate/ (tollgate's own policy and runs)",
            _ => "writes under .claude/ (agent settings)",
        });
    }
    if names
        .windows(2)
        .any(|pair| pair == [".github", "workflows"])
    {
        return Some("writes under .github/workflows/ (CI runs them with repository secrets)");
    }
    if names
        .last()
        .is_some_and(|file| PROTECTED_FILES.contains(file))
    {
        return Some("writes to shell start-up files and tool configs that run code");
    }
    if let Some(home) = home {
        if path.starts_with(home.join(".ssh")) {
            return Some("writes under ~/.ssh/");
        }
        if path.starts_with(home.join(".config/tollgate")) {
            return Some("writes to tollgate's user policy");
        }
    }
    None
}

const PROC_ENVIRON: &str = "reads of /proc/*/environ (process secrets)";

/// The guardrail a read of `path` (absolute, normalised) trips, if any. A process's
/// environment is readable under many names: `/proc/self/environ`, `/proc/<pid>/environ`,
/// `/proc/thread-self/environ`, `/proc/<pid>/task/<tid>/environ`, and again through
/// `/proc/<pid>/root/proc/…`: any `environ` below `/proc` counts.
pub fn read_guardrail(path: &Path) -> Option<&'static str> {
    let under_proc = path.starts_with("/proc");
    let environ = path.file_name().is_some_and(|name| name == "environ");
    (under_proc && environ).then_some(PROC_ENVIRON)
}

/// The guardrail a read of everything below the folder `dir` trips (`grep -r x /proc`, a
/// glob), if any: a folder that holds, or is held by, `/proc`.
pub fn read_guardrail_below(dir: &Path) -> Option<&'static str> {
    (dir.starts_with("/proc") || Path::new("/proc").starts_with(dir)).then_some(PROC_ENVIRON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guardrails_table() {
        let home = Some(Path::new("/home/u"));
        let writes = [
            ("/ws/.git/config", true),
            ("/ws/.git/hooks/pre-commit", true),
            ("/ws/sub/.git/HEAD", true),
            ("/ws/.tollgate/policy.yaml", true),
            ("/ws/.claude/settings.json", true),
            ("/ws/.github/workflows/ci.yml", true),
            ("/ws/.github/CODEOWNERS", false),
            ("/ws/.mcp.json", true),
            ("/home/u/.bashrc", true),
            ("/home/u/.ssh/authorized_keys", true),
            ("/home/u/.gitconfig", true),
            ("/ws/src/main.rs", false),
            ("/ws/.gitignore", false),
            ("/ws/git/config", false),
        ];
        for (path, tripped) in writes {
            assert_eq!(
                write_guardrail(Path::new(path), home).is_some(),
                tripped,
                "{path}"
            );
        }
        assert!(read_guardrail(Path::new("/proc/self/environ")).is_some());
        assert!(read_guardrail(Path::new("/proc/1/environ")).is_some());
        assert!(read_guardrail(Path::new("/proc/self/status")).is_none());
        assert!(read_guardrail(Path::new("/ws/proc/1/environ")).is_none());
        for environ in [
            "/proc/thread-self/environ",
            "/proc/self/task/12/environ",
            "/proc/12/task/12/environ",
            "/proc/1/root/proc/self/environ",
        ] {
            assert!(read_guardrail(Path::new(environ)).is_some(), "{environ}");
        }
        assert!(read_guardrail_below(Path::new("/")).is_some());
        assert!(read_guardrail_below(Path::new("/proc/self/task")).is_some());
        assert!(read_guardrail_below(Path::new("/ws")).is_none());
    }
}
