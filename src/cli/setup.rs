//! Loading what a run or a check needs from disk: task, policies, workdir, home. Every
//! failure here is a configuration error (exit 2) and happens before any model call.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::bash::CommandPattern;
use crate::policy::{Policy, RuleContent, RuleKind, RuleSet, ToolName};
use crate::task::Task;

pub fn read_text(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {what} {}", path.display()))
}

pub fn load_task(path: &Path) -> Result<Task> {
    let text = read_text(path, "task file")?;
    let dir = absolute_parent(path)?;
    Ok(Task::parse(&text, path, &dir)?)
}

pub fn load_policy(path: &Path, home: Option<&Path>) -> Result<Policy> {
    let text = read_text(path, "policy file")?;
    let dir = absolute_parent(path)?;
    Ok(Policy::parse(&text, path, &dir, home)?)
}

fn absolute_parent(path: &Path) -> Result<PathBuf> {
    let absolute =
        std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))?;
    Ok(absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/")))
}

/// The folder must exist; symlinks are resolved so confinement checks compare real paths.
pub fn canonical_dir(path: &Path, what: &str) -> Result<PathBuf> {
    let real = path
        .canonicalize()
        .with_context(|| format!("{what} {} does not exist", path.display()))?;
    if !real.is_dir() {
        return Err(anyhow!("{what} {} is not a folder", path.display()));
    }
    Ok(real)
}

pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.canonicalize().unwrap_or(home))
}

/// Additional directories from every policy, canonical; a missing one is an error naming
/// the policy that asked for it.
pub fn additional_directories(policies: &[&Policy]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for policy in policies {
        for dir in &policy.additional_directories {
            let what = format!("additional directory (from {})", policy.file.display());
            dirs.push(canonical_dir(dir, &what)?);
        }
    }
    Ok(dirs)
}

/// Allow rules that hand out more than they seem to, in words a reviewer can act on.
pub fn dangerous_allow_rules(rules: &RuleSet) -> Vec<String> {
    rules
        .rules()
        .iter()
        .filter(|rule| rule.kind == RuleKind::Allow && rule.tool == ToolName::Bash)
        .filter_map(|rule| {
            let danger = match &rule.content {
                None => Some("allows every command"),
                Some(RuleContent::Command(pattern)) => CommandPattern::danger(pattern),
                Some(_) => None,
            }?;
            Some(format!(
                "allow rule {} at {}: {danger}",
                rule.text, rule.source
            ))
        })
        .collect()
}
