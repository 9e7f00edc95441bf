//! Glob: files matching a glob pattern below a folder, gitignore-aware, sorted by path; only
//! regular files reached beneath the folder's root through no link are listed.

use std::borrow::Cow;

use globset::GlobBuilder;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path::{check_file_access_keeping, shown};
use super::place::{Intent, Judged, place};
use super::walk::files_under;
use super::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input,
};
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName};

const MAX_MATCHES: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobInput {
    pattern: String,
    path: Option<String>,
    /// The folder the decision judged, for the run.
    #[serde(skip)]
    judged: Judged,
}

pub struct GlobTool;

impl Tool for GlobTool {
    fn name(&self) -> ToolName {
        ToolName::Glob
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Lists files matching a glob pattern, e.g. `src/**/*.rs`. Honours .gitignore; sorted by path.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern relative to path; `**` crosses folders, `*` does not"},
                "path": {"type": "string", "description": "Folder to search (default: the workdir)"}
            },
            "required": ["pattern"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let glob: GlobInput = parse_input(&self.name(), input)?;
        let parsed = parse(&glob.pattern)?;
        Ok(Box::new(PreparedGlob { glob, parsed }))
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }
}

/// A Glob call with its pattern checked. Its matcher (a regex) is compiled only when the
/// call runs: deciding a call (`check` decides many) never needs it.
struct PreparedGlob {
    glob: GlobInput,
    parsed: globset::Glob,
}

impl ToolInput for PreparedGlob {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_file_access_keeping(
            ctx,
            &ToolName::Glob,
            self.glob.path.as_deref().unwrap_or("."),
            Access::Read,
            |path| self.glob.judged.keep(path),
        )
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let glob = &self.glob;
            let matcher = self.parsed.compile_matcher();
            let base = glob
                .judged
                .path(glob.path.as_deref().unwrap_or("."), &ctx.workspace);
            let screen = ctx.clone();
            let walk_base = base.clone();
            let matches = ctx
                .on_disk(move || {
                    let place = place(&screen.workspace, &walk_base, Intent::Read)
                        .map_err(|err| ToolError::Failed(err.to_string()))?;
                    if !place.root.metadata(&place.rel).is_ok_and(|m| m.is_dir()) {
                        return Err(ToolError::Failed(format!(
                            "{} is not a folder",
                            walk_base.display()
                        )));
                    }
                    // The walk names files; each one listed is then looked at beneath the
                    // root through no link, so a folder swapped for a link mid-walk lists
                    // nothing from where it leads.
                    Ok(files_under(&walk_base)
                        .iter()
                        .filter(|path| screen.may_read(&ToolName::Glob, path))
                        .filter(|path| {
                            path.strip_prefix(&walk_base)
                                .is_ok_and(|relative| matcher.is_match(relative))
                        })
                        .filter(|path| {
                            place.child(path).is_some_and(|file| {
                                file.root.metadata(&file.rel).is_ok_and(|m| m.is_file())
                            })
                        })
                        .map(|path| shown(path, &screen.workspace.workdir))
                        .collect::<Vec<String>>())
                })
                .await?;
            if matches.is_empty() {
                return Ok(ToolOutput::new(format!(
                    "No files match {} in {}",
                    glob.pattern,
                    base.display()
                )));
            }
            let mut out: Vec<String> = matches.iter().take(MAX_MATCHES).cloned().collect();
            if matches.len() > MAX_MATCHES {
                out.push(format!(
                    "({} more not shown; narrow the pattern)",
                    matches.len() - MAX_MATCHES
                ));
            }
            Ok(ToolOutput::new(out.join("\n")))
        })
    }
}

fn parse(pattern: &str) -> Result<globset::Glob, ToolError> {
    if pattern.starts_with('/') {
        return Err(ToolError::Invalid(
            "pattern must be relative; give the folder as `path`".into(),
        ));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|err| {
            ToolError::Invalid(format!("invalid glob pattern `{pattern}`: {}", err.kind()))
        })
}
