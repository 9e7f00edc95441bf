//! Safety guardrails no configuration can turn off (step 1g): writes to version control (and
//! writes that would make a folder a repository), tollgate's and agents' own config, CI
//! definitions, files other tools run code from later, shell start-up files and keys, a
//! process's own files under /proc, and reads of process environments. Pure: names in, a
//! reason out.
//!
//! Every name is compared the way the most permissive file system would see it (see
//! [`fold`]), so a case-insensitive volume or a tool that folds case cannot get around a
//! guard by spelling `.GIT` or `.Husky`.

use std::borrow::Cow;
use std::path::{Component, Path};
use std::sync::OnceLock;

use foldhash::HashSet;

use tollgate_base::has_prefix;

/// Folders whose contents are never written, at any depth, with why.
const PROTECTED_DIRS: &[(&str, &str)] = &[
    (".git", "writes under .git/ (hooks and config run code)"),
    (
        ".tollgate",
        "writes under .tollgate/ (tollgate's own policy and runs)",
    ),
    (".claude", "writes under .claude/ (agent settings)"),
    (
        ".husky",
        "writes under .husky/ (git hooks the project installs run them)",
    ),
    (
        ".devcontainer",
        "writes under .devcontainer/ (its commands run when a container or codespace is built)",
    ),
    (
        ".circleci",
        "writes to CI definitions (CI runs them with repository secrets)",
    ),
    (
        ".buildkite",
        "writes to CI definitions (CI runs them with repository secrets)",
    ),
];

/// A folder inside a folder: everything below the pair is protected.
const PROTECTED_PAIRS: &[(&str, &str, &str)] = &[
    (
        ".github",
        "workflows",
        "writes under .github/workflows/ (CI runs them with repository secrets)",
    ),
    (
        ".github",
        "actions",
        "writes under .github/actions/ (workflows run these actions with repository secrets)",
    ),
];

/// A file inside a folder, by the file's name (exact) or name prefix (`config*`).
const PROTECTED_PAIR_FILES: &[(&str, FileName, &str)] = &[
    (
        ".cargo",
        FileName::Prefix("config"),
        "writes to .cargo/config* (build settings that name programs cargo runs)",
    ),
    (
        ".vscode",
        FileName::Exact("tasks.json"),
        "writes to .vscode/ task, launch or settings files (the editor runs them on open)",
    ),
    (
        ".vscode",
        FileName::Exact("launch.json"),
        "writes to .vscode/ task, launch or settings files (the editor runs them on open)",
    ),
    (
        ".vscode",
        FileName::Exact("settings.json"),
        "writes to .vscode/ task, launch or settings files (the editor runs them on open)",
    ),
];

const SHELL_OR_TOOL_CONFIG: &str = "writes to shell start-up files and tool configs that run code";
const HOOKS_AND_CI: &str = "writes to files that hook managers or CI run code from";

/// File names never written, wherever they are.
const PROTECTED_FILES: &[(&str, &str)] = &[
    (".bashrc", SHELL_OR_TOOL_CONFIG),
    (".bash_profile", SHELL_OR_TOOL_CONFIG),
    (".bash_login", SHELL_OR_TOOL_CONFIG),
    (".bash_logout", SHELL_OR_TOOL_CONFIG),
    (".profile", SHELL_OR_TOOL_CONFIG),
    (".zshrc", SHELL_OR_TOOL_CONFIG),
    (".zprofile", SHELL_OR_TOOL_CONFIG),
    (".zshenv", SHELL_OR_TOOL_CONFIG),
    (".zlogin", SHELL_OR_TOOL_CONFIG),
    (".kshrc", SHELL_OR_TOOL_CONFIG),
    (".envrc", SHELL_OR_TOOL_CONFIG),
    (".gitconfig", SHELL_OR_TOOL_CONFIG),
    (".gitmodules", SHELL_OR_TOOL_CONFIG),
    (".gitattributes", SHELL_OR_TOOL_CONFIG),
    (".mcp.json", SHELL_OR_TOOL_CONFIG),
    (".npmrc", SHELL_OR_TOOL_CONFIG),
    (".yarnrc", SHELL_OR_TOOL_CONFIG),
    (".yarnrc.yml", SHELL_OR_TOOL_CONFIG),
    (".pnpmfile.cjs", SHELL_OR_TOOL_CONFIG),
    ("bunfig.toml", SHELL_OR_TOOL_CONFIG),
    ("rust-toolchain", SHELL_OR_TOOL_CONFIG),
    ("rust-toolchain.toml", SHELL_OR_TOOL_CONFIG),
    (".devcontainer.json", SHELL_OR_TOOL_CONFIG),
    (".pre-commit-config.yaml", HOOKS_AND_CI),
    (".pre-commit-config.yml", HOOKS_AND_CI),
    (".gitlab-ci.yml", HOOKS_AND_CI),
    (".travis.yml", HOOKS_AND_CI),
    ("azure-pipelines.yml", HOOKS_AND_CI),
    ("bitbucket-pipelines.yml", HOOKS_AND_CI),
    ("jenkinsfile", HOOKS_AND_CI),
    // Every git directory needs a HEAD; with it, `objects/` and `refs/` (or a `commondir`)
    // make any folder a repository whose config git obeys.
    (
        "head",
        "writes a file named HEAD (it makes its folder a git repository whose config runs code)",
    ),
];

/// Under the home folder (compared folded too).
const PROTECTED_HOME: &[(&str, &str)] = &[
    (".ssh", "writes under ~/.ssh/"),
    (".config/tollgate", "writes to tollgate's user policy"),
    (
        ".config/git",
        "writes to the user's git config (it runs code)",
    ),
];

enum FileName {
    Exact(&'static str),
    Prefix(&'static str),
}

/// The guardrail a write to `path` (absolute, resolved) trips, if any.
pub fn write_guardrail(path: &Path, home: Option<&Path>) -> Option<&'static str> {
    if process_file(path) {
        return Some(PROCESS_FILES_WRITE);
    }
    let names = folded_names(path);
    // Every check below needs some name to be a guarded one, an NTFS short name (`~`), or a
    // `*.git`; most paths hold none, and one lookup per name tells.
    if !names.iter().any(may_be_guarded) {
        return None;
    }
    guardrail_of_names(&names, home)
}

/// [`write_guardrail`] of a path's folded names, every check made.
fn guardrail_of_names(names: &[Folded<'_>], home: Option<&Path>) -> Option<&'static str> {
    if let Some(reason) = names.iter().find_map(|name| {
        PROTECTED_DIRS
            .iter()
            .find(|(dir, _)| name.is(dir))
            .map(|(_, reason)| *reason)
    }) {
        return Some(reason);
    }
    // `repo.git` is how bare repositories are named: writing into one plants its config.
    if names
        .iter()
        .any(|name| name.text.len() > ".git".len() && name.text.ends_with(".git"))
    {
        return Some(
            "writes into a folder named like a bare git repository (*.git: its config runs code)",
        );
    }
    for pair in names.windows(2) {
        if let Some((_, _, reason)) = PROTECTED_PAIRS
            .iter()
            .find(|(outer, inner, _)| pair[0].is(outer) && pair[1].is(inner))
        {
            return Some(reason);
        }
    }
    if let [.., dir, file] = names
        && let Some((_, _, reason)) = PROTECTED_PAIR_FILES.iter().find(|(outer, name, _)| {
            dir.is(outer)
                && match name {
                    FileName::Exact(exact) => file.is(exact),
                    FileName::Prefix(prefix) => file.text.starts_with(prefix),
                }
        })
    {
        return Some(reason);
    }
    if let Some(file) = names.last()
        && let Some((_, reason)) = PROTECTED_FILES.iter().find(|(name, _)| file.is(name))
    {
        return Some(reason);
    }
    let home = home.map(folded_names)?;
    let below_home = names.strip_prefix(home.as_slice())?;
    PROTECTED_HOME.iter().find_map(|(dir, reason)| {
        let dir: Vec<&str> = dir.split('/').collect();
        let inside = below_home.len() >= dir.len()
            && below_home
                .iter()
                .zip(&dir)
                .all(|(name, guarded)| name.is(guarded));
        inside.then_some(*reason)
    })
}

/// Every name a write guardrail compares a path's names with: the protected folders, files,
/// pairs and files in folders, and the first folder of each protected place under the home
/// folder.
fn guarded_names() -> &'static HashSet<&'static str> {
    static NAMES: OnceLock<HashSet<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let pair_files = PROTECTED_PAIR_FILES.iter().flat_map(|(outer, file, _)| {
            let exact = match file {
                FileName::Exact(exact) => Some(*exact),
                FileName::Prefix(_) => None,
            };
            std::iter::once(*outer).chain(exact)
        });
        PROTECTED_DIRS
            .iter()
            .map(|(dir, _)| *dir)
            .chain(PROTECTED_FILES.iter().map(|(file, _)| *file))
            .chain(
                PROTECTED_PAIRS
                    .iter()
                    .flat_map(|(outer, inner, _)| [*outer, *inner]),
            )
            .chain(pair_files)
            .chain(
                PROTECTED_HOME
                    .iter()
                    .filter_map(|(dir, _)| dir.split('/').next()),
            )
            .collect()
    })
}

/// Whether a folded name may be one a write guardrail compares with (see [`Folded::is`]): a
/// guarded name, an NTFS short name, or a `*.git`. One lookup; every guardrail check needs
/// some name of the path to pass it.
fn may_be_guarded(name: &Folded<'_>) -> bool {
    name.tilde.is_some() || name.text.ends_with(".git") || guarded_names().contains(&*name.text)
}

/// Whether some write guardrail may name an entry called `name` (alone or as part of a pair):
/// when not, [`write_guardrail`] cannot trip on a path ending in it unless an ancestor did.
/// A cheap test for walking a large tree.
pub fn may_guard_name(name: &str) -> bool {
    let name = Folded::new(fold(name));
    may_be_guarded(&name)
        || PROTECTED_PAIR_FILES.iter().any(|(_, file, _)| {
            matches!(file, FileName::Prefix(prefix) if name.text.starts_with(prefix))
        })
}

/// What a git directory holds besides `HEAD`: writing one of these next to an existing
/// `HEAD` changes (or completes) a repository.
const GIT_DIR_PARTS: &[&str] = &[
    "config",
    "config.worktree",
    "packed-refs",
    "commondir",
    "objects",
    "refs",
    "hooks",
    "info",
    "worktrees",
    "modules",
];

/// The guardrail a write to `path` trips because a folder on its way already holds a
/// `HEAD` (`holds_head` looks on disk; the policy stays pure): writing `config`, `objects/`,
/// `refs/`, `hooks/`… there makes or changes a repository git would obey. A `HEAD` written
/// by the model is refused by [`write_guardrail`]; this covers one that was already there.
pub fn git_dir_write(path: &Path, holds_head: &dyn Fn(&Path) -> bool) -> Option<&'static str> {
    // The folder before a name is built only for a name git keeps in its directory: every
    // write the gate checks passes here, few name such a part.
    let trips = path.components().enumerate().any(|(at, component)| {
        matches!(component, Component::Normal(name)
            if GIT_DIR_PARTS.contains(&&*fold(&name.to_string_lossy())))
            && holds_head(&path.components().take(at).collect::<std::path::PathBuf>())
    });
    trips
        .then_some("writes into a folder that holds a HEAD (a git directory: its config runs code)")
}

const PROC_ENVIRON: &str = "reads of /proc/*/environ (process secrets)";

const PROCESS_FILES_READ: &str = "reads of a process's own files under /proc (its memory, environment and open files; a command's are not known before it runs)";

const PROCESS_FILES_WRITE: &str = "writes to a process's own files under /proc (its memory and open files; a command's are not known before it runs)";

/// Whether `path` names the files of a process under `/proc`: `/proc/self`,
/// `/proc/thread-self`, `/proc/<pid>` and what is below them. The resolver never looks these
/// up (see `base::resolve`): a path reaches one only where the command's own standard streams,
/// working directory or root do not apply.
fn process_file(path: &Path) -> bool {
    let Some(rest) = tollgate_base::strip_prefix(path, Path::new("/proc")) else {
        return false;
    };
    match rest.components().next() {
        Some(Component::Normal(name)) => {
            let name = name.as_encoded_bytes();
            name == b"self"
                || name == b"thread-self"
                || (!name.is_empty() && name.iter().all(u8::is_ascii_digit))
        }
        _ => false,
    }
}

/// The guardrail a read of `path` (absolute, resolved) trips, if any: a process's own files
/// (see [`process_file`]), and a process's environment under any name: `/proc/self/environ`,
/// `/proc/<pid>/environ`, `/proc/thread-self/environ`, `/proc/<pid>/task/<tid>/environ`, and
/// again through `/proc/<pid>/root/proc/…`: any `environ` below `/proc` counts.
pub fn read_guardrail(path: &Path) -> Option<&'static str> {
    if !has_prefix(path, Path::new("/proc")) {
        return None;
    }
    if path.file_name().is_some_and(|name| name == "environ") {
        return Some(PROC_ENVIRON);
    }
    (process_file(path) && !own_status_file(path)).then_some(PROCESS_FILES_READ)
}

/// What a command may read of its own process: the status files that describe it (its
/// limits, capabilities, cgroup, memory map), which hold nothing it did not already have.
/// Only under `/proc/self` and `/proc/thread-self` — the command's own — never another
/// process's `/proc/<pid>`, and nothing that is a link or a folder (`cwd`, `root`, `fd`).
const OWN_STATUS_FILES: &[&str] = &[
    "status",
    "stat",
    "statm",
    "cgroup",
    "limits",
    "comm",
    "cmdline",
    "maps",
    "mountinfo",
    "mounts",
    "io",
    "sched",
    "oom_score",
];

fn own_status_file(path: &Path) -> bool {
    let Some(rest) = tollgate_base::strip_prefix(path, Path::new("/proc")) else {
        return false;
    };
    let mut parts = rest.components();
    let (Some(Component::Normal(process)), Some(Component::Normal(file)), None) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    (process == "self" || process == "thread-self")
        && file
            .to_str()
            .is_some_and(|file| OWN_STATUS_FILES.contains(&file))
}

/// The guardrail a read of everything below the folder `dir` trips (`grep -r x /proc`, a
/// glob), if any: a folder that holds, or is held by, `/proc`.
pub fn read_guardrail_below(dir: &Path) -> Option<&'static str> {
    let proc = Path::new("/proc");
    (has_prefix(dir, proc) || has_prefix(proc, dir)).then_some(PROC_ENVIRON)
}

/// The path's names, each folded. A name that is not UTF-8 is kept lossily: the guarded
/// names are ASCII, so a replacement character can only make a match less likely for names
/// that are not guarded anyway.
fn folded_names(path: &Path) -> Vec<Folded<'_>> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Folded::new(match name.to_str() {
                Some(name) => fold(name),
                None => Cow::Owned(fold(&name.to_string_lossy()).into_owned()),
            })),
            _ => None,
        })
        .collect()
}

/// A folded name with the place of its `~` found once: each name of a path is compared with
/// every guarded name (see [`Folded::is`]).
#[derive(PartialEq)]
struct Folded<'n> {
    text: Cow<'n, str>,
    tilde: Option<usize>,
}

impl<'n> Folded<'n> {
    fn new(text: Cow<'n, str>) -> Folded<'n> {
        let tilde = text.bytes().position(|b| b == b'~');
        Folded { text, tilde }
    }

    /// Whether this is the guarded name, or an NTFS 8.3 short name that may stand for it
    /// (`git~1` for `.git`, `husky~1` for `.husky`): up to six leading characters of the name
    /// without its dot, `~`, a digit.
    fn is(&self, guarded: &str) -> bool {
        if self.text == guarded {
            return true;
        }
        let Some(tilde) = self.tilde else {
            return false;
        };
        let (stem, digits) = (&self.text[..tilde], &self.text[tilde + 1..]);
        let long = guarded.trim_start_matches('.');
        !stem.is_empty()
            && stem.len() <= 6
            && !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && long.len() >= stem.len()
            && long.starts_with(stem)
    }
}

/// A name as the most permissive file system sees it: case folded (macOS and Windows
/// volumes, case-folding tools); without the code points HFS+ ignores (so `.g\u{200c}it` is
/// `.git` there); without an NTFS stream suffix (`.git::$INDEX_ALLOCATION`) and the trailing
/// dots and spaces NTFS drops. Git's own `is_hfs_dotgit`/`is_ntfs_dotgit` fold the same way.
pub fn fold(name: &str) -> Cow<'_, str> {
    // The usual name (ASCII, lower case, no `:`, no trailing dot or space) is its own folding;
    // the gate folds every component of every path it checks.
    let plain = name
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase() && b != b':');
    if plain && !name.ends_with(['.', ' ']) {
        return Cow::Borrowed(name);
    }
    let name = name.split(':').next().unwrap_or(name);
    let kept: String = name
        .chars()
        .filter(|c| !is_hfs_ignorable(*c))
        .flat_map(char::to_lowercase)
        .collect();
    Cow::Owned(kept.trim_end_matches(['.', ' ']).to_owned())
}

/// Code points HFS+ drops when it compares names.
fn is_hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-lookup-per-name screen never hides a guardrail the full checks find: every
    /// guarded name and its variants, alone, as the last name, inside and under the home.
    #[test]
    fn the_screen_lets_every_guarded_path_through() {
        let home = Path::new("/home/u");
        let mut names: Vec<String> = guarded_names().iter().map(|n| (*n).to_owned()).collect();
        names.extend(
            [
                "workflows",
                "actions",
                "config.toml",
                "tasks.json",
                "git",
                "tollgate",
            ]
            .map(String::from),
        );
        let variants = |name: &str| {
            let upper = name.to_uppercase();
            let short = format!(
                "{}~1",
                name.trim_start_matches('.')
                    .chars()
                    .take(6)
                    .collect::<String>()
            );
            vec![
                name.to_owned(),
                upper,
                short,
                format!("{name}."),
                format!("x{name}.git"),
            ]
        };
        let mut paths = Vec::new();
        for a in &names {
            for va in variants(a) {
                paths.push(format!("/ws/{va}"));
                paths.push(format!("/ws/{va}/f"));
                paths.push(format!("/home/u/{va}/x"));
                for b in &names {
                    paths.push(format!("/ws/{va}/{b}"));
                    paths.push(format!("/home/u/{va}/{b}"));
                }
            }
        }
        let mut tripped = 0;
        for path in &paths {
            let path = Path::new(path);
            let full = guardrail_of_names(&folded_names(path), Some(home));
            assert_eq!(
                write_guardrail(path, Some(home)),
                full,
                "{}",
                path.display()
            );
            tripped += usize::from(full.is_some());
        }
        assert!(tripped > paths.len() / 2, "{tripped} of {}", paths.len());
    }

    #[test]
    fn write_guardrails_table() {
        let home = Some(Path::new("/home/u"));
        let writes = [
            ("/ws/.git/config", true),
            ("/ws/.git/hooks/pre-commit", true),
            ("/ws/sub/.git/HEAD", true),
            ("/ws/.tollgate/policy.yaml", true),
            ("/ws/.claude/settings.json", true),
            ("/ws/.github/workflows/ci.yml", true),
            ("/ws/.github/actions/setup/action.yml", true),
            ("/ws/.github/CODEOWNERS", false),
            ("/ws/.github/dependabot.yml", false),
            ("/ws/.mcp.json", true),
            ("/home/u/.bashrc", true),
            ("/home/u/.ssh/authorized_keys", true),
            ("/home/u/.gitconfig", true),
            ("/home/u/.config/git/config", true),
            ("/home/u/.config/tollgate/policy.yaml", true),
            ("/home/u/.config/other/x", false),
            ("/ws/src/main.rs", false),
            ("/ws/.gitignore", false),
            ("/ws/git/config", false),
            // Files other tools run code from later.
            ("/ws/.husky/pre-commit", true),
            ("/ws/.husky/_/husky.sh", true),
            ("/ws/.pre-commit-config.yaml", true),
            ("/ws/.cargo/config", true),
            ("/ws/.cargo/config.toml", true),
            ("/ws/sub/.cargo/config.toml", true),
            ("/ws/.cargo/registry-notes.md", false),
            ("/ws/.npmrc", true),
            ("/ws/pkg/.npmrc", true),
            ("/ws/.envrc", true),
            ("/ws/.gitattributes", true),
            ("/ws/.gitmodules", true),
            ("/ws/.devcontainer/devcontainer.json", true),
            ("/ws/.devcontainer.json", true),
            ("/ws/.vscode/tasks.json", true),
            ("/ws/.vscode/extensions.json", false),
            ("/ws/.gitlab-ci.yml", true),
            ("/ws/Jenkinsfile", true),
            ("/ws/Makefile", false),
            ("/ws/package.json", false),
            // Planted repositories: HEAD anywhere, anything in a `*.git` folder.
            ("/ws/src/evil/HEAD", true),
            ("/ws/src/evil/objects/info/packs", false),
            ("/ws/src/repo.git/config", true),
            ("/ws/src/repo.git", true),
            ("/ws/src/header.rs", false),
            ("/ws/src/heads/main.rs", false),
        ];
        for (path, tripped) in writes {
            assert_eq!(
                write_guardrail(Path::new(path), home).is_some(),
                tripped,
                "{path}"
            );
        }
    }

    #[test]
    fn every_guarded_name_is_matched_however_a_file_system_spells_it() {
        let home = Some(Path::new("/home/u"));
        let variants = [
            "/ws/.GIT/config",
            "/ws/sub/.Git/hooks/post-checkout",
            "/ws/.g\u{200c}it/config",
            "/ws/.git\u{feff}/config",
            "/ws/.git./config",
            "/ws/.git /config",
            "/ws/.git::$INDEX_ALLOCATION/config",
            "/ws/GIT~1/config",
            "/ws/git~2/hooks/x",
            "/ws/.GITHUB/Workflows/ci.yml",
            "/ws/GITHUB~1/workflows/ci.yml",
            "/ws/.github/ACTIONS/a/action.yml",
            "/ws/.Husky/pre-commit",
            "/ws/HUSKY~1/pre-commit",
            "/ws/.Pre-Commit-Config.YAML",
            "/ws/.CARGO/Config.toml",
            "/ws/.NPMRC",
            "/ws/.EnvRC",
            "/ws/.envrc.",
            "/ws/.BASHRC",
            "/ws/src/evil/head",
            "/ws/src/evil/Head",
            "/ws/src/Repo.GIT/config",
            "/ws/.TOLLGATE/policy.yaml",
            "/ws/.VSCode/Tasks.json",
            "/home/u/.SSH/authorized_keys",
            "/home/u/.Config/Git/config",
        ];
        for path in variants {
            assert!(
                write_guardrail(Path::new(path), home).is_some(),
                "{path} slipped through"
            );
        }
        assert_eq!(fold(".GiT. "), ".git");
        let same = |folded: &str, guarded: &str| Folded::new(Cow::Borrowed(folded)).is(guarded);
        assert!(same("git~1", ".git"));
        assert!(!same("gi~", ".git"));
        assert!(!same("gitlab~1", ".git"));
    }

    #[test]
    fn writes_next_to_an_existing_head_are_guarded() {
        let holds_head = |dir: &Path| dir == Path::new("/ws/fixtures/repo");
        let cases = [
            ("/ws/fixtures/repo/config", true),
            ("/ws/fixtures/repo/Objects/ab/cdef", true),
            ("/ws/fixtures/repo/refs/heads/main", true),
            ("/ws/fixtures/repo/hooks/post-checkout", true),
            ("/ws/fixtures/repo/README.md", false),
            ("/ws/fixtures/other/config", false),
            ("/ws/src/objects/mod.rs", false),
        ];
        for (path, tripped) in cases {
            assert_eq!(
                git_dir_write(Path::new(path), &holds_head).is_some(),
                tripped,
                "{path}"
            );
        }
    }

    #[test]
    fn read_guardrails() {
        assert!(read_guardrail(Path::new("/proc/self/environ")).is_some());
        assert!(read_guardrail(Path::new("/proc/1/environ")).is_some());
        // A command's own status files describe it, and nothing more.
        assert!(read_guardrail(Path::new("/proc/self/status")).is_none());
        assert!(read_guardrail(Path::new("/proc/thread-self/limits")).is_none());
        assert!(read_guardrail(Path::new("/proc/1/status")).is_some());
        assert!(read_guardrail(Path::new("/proc/self/status/x")).is_some());
        assert!(read_guardrail(Path::new("/proc/self/mem")).is_some());
        assert!(read_guardrail(Path::new("/proc/self/fdinfo")).is_some());
        assert!(read_guardrail(Path::new("/proc/cpuinfo")).is_none());
        assert!(read_guardrail(Path::new("/proc/selfish")).is_none());
        for process in [
            "/proc/self/fd/3",
            "/proc/12/mem",
            "/proc/thread-self",
            "/proc/1",
        ] {
            assert!(read_guardrail(Path::new(process)).is_some(), "{process}");
            assert!(
                write_guardrail(Path::new(process), None).is_some(),
                "{process}"
            );
        }
        assert!(write_guardrail(Path::new("/proc/sys/kernel/x"), None).is_none());
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
