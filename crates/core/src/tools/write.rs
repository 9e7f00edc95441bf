//! Write: creates or replaces a whole file. Replacing needs a prior Read of the current
//! version, so the model never overwrites what it has not seen. The file is opened once,
//! beneath the workspace root that holds it and through no link (`place`), and checked and
//! written through that descriptor.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::path::{check_file_access_keeping, resolve_path, shown};
use super::place::{Intent, Judged, place};
use super::regular_file;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input};
use crate::ledger::{Allowance, GitWrites};
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName};

/// What a Write or Edit of `raw` may change, whoever allowed it: the one file the gate
/// judged (and the folders a Write makes on the way to it).
pub(super) fn the_file(raw: &str, ctx: &PermissionContext) -> Allowance {
    let workspace = ctx.workspace;
    let judged = resolve_path(raw, &workspace.workdir, workspace.home.as_deref());
    Allowance::named(vec![judged], GitWrites::None)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    file_path: String,
    /// The path the decision judged, for the run.
    #[serde(skip)]
    judged: Judged,
    content: String,
}

pub struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> ToolName {
        ToolName::Write
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Writes a file, creating it and its folders if needed. To replace an existing file, Read it first. Prefer Edit for changes to existing files.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "content": {"type": "string"}
            },
            "required": ["file_path", "content"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let write: WriteInput = parse_input(&self.name(), input)?;
        Ok(Box::new(write))
    }
}

impl ToolInput for WriteInput {
    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_file_access_keeping(
            ctx,
            &ToolName::Write,
            &self.file_path,
            Access::Write,
            |path| self.judged.keep(path),
        )
    }

    fn allowed_effects(&self, ctx: &PermissionContext, _by_check: bool) -> Allowance {
        the_file(&self.file_path, ctx)
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let write = self;
            let path = write.judged.path(&write.file_path, &ctx.workspace);
            let (workspace, files, target) =
                (ctx.workspace.clone(), ctx.files.clone(), path.clone());
            let content = write.content.clone();
            // Opened once, beneath its root and through no link: the staleness check and the
            // write are made on that one descriptor.
            let existed = ctx
                .on_disk(move || {
                    let place = place(&workspace, &target, Intent::Write).map_err(failed)?;
                    if let Some(parent) = place.rel.parent()
                        && !parent.as_os_str().is_empty()
                    {
                        place.root.create_dirs(parent).map_err(failed)?;
                    }
                    let (mut file, existing) =
                        regular_file::open_for_writing(&place).map_err(failed)?;
                    files.check_fresh(&target, existing.as_ref())?;
                    let after = regular_file::replace(&place, &mut file, content.as_bytes())
                        .map_err(failed)?;
                    files.record(&target, &after);
                    Ok(existing.is_some())
                })
                .await?;
            let verb = if existed { "Replaced" } else { "Created" };
            Ok(ToolOutput::new(format!(
                "{verb} {} ({} bytes)",
                shown(&path, &ctx.workspace.workdir),
                write.content.len()
            )))
        })
    }
}

/// An error of the work on disk as the model reads it.
fn failed(err: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PermissionMode, RuleSet, Workspace};

    /// The run acts on the path its decision judged: a link made between the decision and the
    /// run (into `.git/`, which the guardrail asks about) fails the call instead of leading it
    /// to `.git/config`, where a second resolution would have gone.
    #[tokio::test]
    async fn a_link_made_after_the_decision_fails_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let workspace = Workspace::new(ws.clone(), vec![], None);
        let rules = RuleSet::default();
        let decide = |input: &dyn ToolInput| {
            input.check_permissions(&PermissionContext {
                mode: PermissionMode::AcceptEdits,
                rules: &rules,
                workspace: &workspace,
                disk: None,
                auto_allow_bash: false,
            })
        };
        let call = json!({"file_path": "src/x/config", "content": "[core]\n\tfsmonitor = evil\n"});
        let input = WriteTool.prepare(&call).unwrap();
        assert!(matches!(decide(input.as_ref()), ToolCheck::Allow { .. }));
        std::os::unix::fs::symlink("../.git", ws.join("src/x")).unwrap();
        let (ctx, _abort) = ToolContext::for_tests(workspace.clone());
        let err = input.run(&ctx).await.unwrap_err().to_string();
        assert!(err.contains("through a symbolic link"), "{err}");
        assert!(!ws.join(".git/config").exists());
        let again = WriteTool.prepare(&call).unwrap();
        assert!(matches!(decide(again.as_ref()), ToolCheck::Ask { .. }));
    }
}
