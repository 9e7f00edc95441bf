//! Custom sub-agents (S9): agent files — Claude Code's `.claude/agents/*.md` in the workdir,
//! the task's `agents:` paths and enabled plugins' `agents/` folders. Owns finding and parsing
//! them; the Agent tool offers them and the agent loop runs them as general sub-agents whose
//! tools only narrow the parent's. An agent file is text for the model, never a grant.

mod parse;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use parse::{Parsed, parse};

use crate::base::normalize_lexically;
use crate::config::ConfigError;
use crate::skills::{read_bounded, resolve_confined};
use crate::tools::AgentProfile;

/// Where the workdir's agent files are (Claude Code's place for them).
pub const PROJECT_AGENTS: &str = ".claude/agents";

/// The agents found, by name, and one line per thing a file said that is not applied.
#[derive(Debug, Default)]
pub struct Found {
    pub agents: Vec<Arc<AgentProfile>>,
    pub notices: Vec<String>,
}

/// The agents under `roots`: a root that is a file is one agent file; a folder holds them as
/// `*.md`; a root that does not exist holds none. An unreadable or malformed file, or two
/// agents of one name, is an error naming the file: a run never starts with an agent silently
/// missing. A root inside `workdir` is repository content: a file under it that resolves
/// outside the workdir (a link) is refused, as Read would refuse it.
pub fn discover(roots: &[PathBuf], workdir: &Path) -> Result<Found, ConfigError> {
    let workdir_real = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let mut found = Found::default();
    for root in roots {
        let confined = normalize_lexically(root).starts_with(normalize_lexically(workdir));
        for file in agent_files(root)? {
            resolve_confined(&file, confined.then_some(&workdir_real), "agents")?;
            let Parsed { profile, notices } = parse(&read_bounded(&file)?, &file)?;
            if let Some(first) = found
                .agents
                .iter()
                .find(|seen| seen.name.eq_ignore_ascii_case(&profile.name))
            {
                return Err(ConfigError::whole_file(
                    &file,
                    format!(
                        "a second agent named `{}` (the first is {})",
                        profile.name,
                        first.file.display()
                    ),
                ));
            }
            found.notices.extend(
                notices
                    .into_iter()
                    .map(|notice| format!("{}: {notice}", file.display())),
            );
            found.agents.push(Arc::new(profile));
        }
    }
    found.agents.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The agent files of one root, in name order. What is there but not a regular file is an
/// error, never opened (a FIFO would hang the run before it starts).
fn agent_files(root: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new());
        }
        Err(err) => return Err(ConfigError::whole_file(root, format!("cannot read: {err}"))),
    };
    if meta.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    if !meta.is_dir() {
        return Err(ConfigError::whole_file(
            root,
            "not a regular file or a folder: an agent file is a text file".to_string(),
        ));
    }
    let entries = std::fs::read_dir(root)
        .map_err(|err| ConfigError::whole_file(root, format!("cannot list agents: {err}")))?;
    let mut files = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push(path),
            Ok(_) => {
                return Err(ConfigError::whole_file(
                    &path,
                    "not a regular file: an agent file is a text file".to_string(),
                ));
            }
            Err(err) => {
                return Err(ConfigError::whole_file(
                    &path,
                    format!("cannot read: {err}"),
                ));
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_found_in_folders_and_files_and_a_duplicate_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &str, name: &str| {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                path,
                format!("---\nname: {name}\ndescription: d\nmodel: opus\n---\nDo it.\n"),
            )
            .unwrap();
        };
        write(".claude/agents/b.md", "bee");
        write(".claude/agents/a.md", "ay");
        write(".claude/agents/notes.txt", "ignored");
        write("shared/one.md", "extra");
        let roots = [
            dir.path().join(PROJECT_AGENTS),
            dir.path().join("shared/one.md"),
            dir.path().join("missing"),
        ];
        let found = discover(&roots, dir.path()).unwrap();
        let names: Vec<&str> = found.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["ay", "bee", "extra"]);
        assert_eq!(found.notices.len(), 3, "{:?}", found.notices);
        assert!(found.notices[0].ends_with(
            "model `opus` is not applied: a sub-agent runs on the run's model, under its budget"
        ));
        write("again/c.md", "bee");
        let err = discover(
            &[dir.path().join(PROJECT_AGENTS), dir.path().join("again")],
            dir.path(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("a second agent named `bee`"),
            "{err}"
        );
    }

    #[test]
    fn a_repository_agent_file_linked_outside_the_workdir_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(
            outside.path().join("x.md"),
            "---\nname: x\ndescription: d\n---\nGo.\n",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(PROJECT_AGENTS)).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("x.md"),
            dir.path().join(PROJECT_AGENTS).join("x.md"),
        )
        .unwrap();
        let err = discover(&[dir.path().join(PROJECT_AGENTS)], dir.path()).unwrap_err();
        assert!(err.to_string().contains("outside the workdir"), "{err}");
    }
}
