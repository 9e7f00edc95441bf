//! ToolSearch (S7): finds deferred tools by `select:Name1,Name2` or by keywords, returns
//! their full definitions, and marks them loaded so the next request offers them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::run_state::ToolDefinition;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input};
use crate::policy::{PermissionContext, ToolCheck, ToolName};

const DEFAULT_MAX_RESULTS: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSearchInput {
    query: String,
    max_results: Option<usize>,
}

pub struct ToolSearchTool;

impl Tool for ToolSearchTool {
    fn name(&self) -> ToolName {
        ToolName::ToolSearch
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Loads deferred tools (listed by name in the system prompt) so you can call them. \
             query: `select:Name1,Name2` for exact names, or keywords to search names and descriptions. \
             Returns their definitions; they are callable from your next response on.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "`select:Name1,Name2`, or keywords"},
                "max_results": {"type": "integer", "minimum": 1, "description": "Keyword search: at most this many tools (default 5)"}
            },
            "required": ["query"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let input: ToolSearchInput = parse_input(&self.name(), input)?;
        if input.query.trim().is_empty() {
            return Err(ToolError::Invalid("query is empty".into()));
        }
        Ok(Box::new(input))
    }
}

impl ToolInput for ToolSearchInput {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        // Loading a definition grants nothing: each loaded tool's calls pass the gate as any.
        ToolCheck::Allow {
            reason: "ToolSearch only reads tool definitions".into(),
            rule: None,
            updated_input: None,
        }
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let catalogue = ctx.state.deferred.catalogue();
            let found = search(
                &catalogue,
                &self.query,
                self.max_results.unwrap_or(DEFAULT_MAX_RESULTS),
            );
            if found.is_empty() {
                let names: Vec<String> = catalogue.iter().map(|d| d.name.to_string()).collect();
                return Ok(ToolOutput::new(format!(
                    "No deferred tool matches `{}`. Deferred tools: {}",
                    self.query,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            let names: Vec<ToolName> = found.iter().map(|d| d.name.clone()).collect();
            ctx.state.deferred.load(&names);
            Ok(ToolOutput::new(render(&found)))
        })
    }
}

/// `select:` names exactly (unknown names are skipped); keywords rank by how many terms the
/// name (counted twice) and the description contain.
fn search<'c>(catalogue: &'c [ToolDefinition], query: &str, max: usize) -> Vec<&'c ToolDefinition> {
    if let Some(names) = query.trim().strip_prefix("select:") {
        return names
            .split(',')
            .filter_map(|name| {
                catalogue
                    .iter()
                    .find(|d| d.name.to_string().eq_ignore_ascii_case(name.trim()))
            })
            .collect();
    }
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let mut scored: Vec<(usize, &ToolDefinition)> = catalogue
        .iter()
        .map(|definition| {
            let name = definition.name.to_string().to_lowercase();
            let description = definition.description.to_lowercase();
            let score = terms
                .iter()
                .map(|term| {
                    2 * usize::from(name.contains(term)) + usize::from(description.contains(term))
                })
                .sum();
            (score, definition)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    scored.into_iter().take(max).map(|(_, d)| d).collect()
}

fn render(found: &[&ToolDefinition]) -> String {
    let mut text = String::from("<functions>\n");
    for definition in found {
        let function = json!({
            "name": definition.name.to_string(),
            "description": definition.description,
            "parameters": definition.input_schema,
        });
        text.push_str(&format!("<function>{function}</function>\n"));
    }
    text.push_str("</functions>\nThese tools are callable from your next response on.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue() -> Vec<ToolDefinition> {
        let define = |name: ToolName, description: &str| ToolDefinition {
            name,
            description: description.into(),
            input_schema: json!({"type": "object"}),
        };
        vec![
            define(
                ToolName::WebFetch,
                "Fetches a URL and answers a prompt about the page.",
            ),
            define(
                ToolName::Mcp {
                    server: "jira".into(),
                    tool: Some("create_issue".into()),
                },
                "Creates an issue in a tracker.",
            ),
        ]
    }

    #[test]
    fn select_and_keywords_find_deferred_tools() {
        let catalogue = catalogue();
        let names = |query: &str, max: usize| -> Vec<String> {
            search(&catalogue, query, max)
                .iter()
                .map(|d| d.name.to_string())
                .collect()
        };
        // (query, max, found)
        let table: &[(&str, usize, &[&str])] = &[
            ("select:WebFetch", 5, &["WebFetch"]),
            (
                "select:webfetch, mcp__jira__create_issue, Nope",
                5,
                &["WebFetch", "mcp__jira__create_issue"],
            ),
            ("url page", 5, &["WebFetch"]),
            ("jira issue", 5, &["mcp__jira__create_issue"]),
            ("issue url", 1, &["mcp__jira__create_issue"]),
            ("nothing-like-it", 5, &[]),
        ];
        for (query, max, found) in table {
            assert_eq!(names(query, *max), *found, "{query}");
        }
    }

    #[tokio::test]
    async fn a_search_loads_what_it_found() {
        let dir = tempfile::tempdir().unwrap();
        let (_handle, abort) = crate::base::AbortHandle::new();
        let ctx = ToolContext {
            resolver: Default::default(),
            workspace: std::sync::Arc::new(crate::policy::Workspace::new(
                dir.path().to_path_buf(),
                vec![],
                None,
            )),
            rules: Default::default(),
            limits: crate::tools::ToolLimits::default(),
            abort,
            files: crate::tools::FileStateCache::default(),
            progress: None,
            sandbox: None,
            read_only: None,
            allow_basis: Default::default(),
            command_env: crate::exec::RunEnv::new(&Default::default()).model,
            state: crate::tools::RunState {
                deferred: crate::tools::run_state::DeferredTools::new(catalogue()),
                ..Default::default()
            },
        };
        let input = ToolSearchTool
            .prepare(&json!({"query": "select:WebFetch"}))
            .unwrap();
        let output = input.run(&ctx).await.unwrap();
        assert!(
            output.content.contains("\"name\":\"WebFetch\""),
            "{}",
            output.content
        );
        assert_eq!(ctx.state.deferred.loaded(), vec![ToolName::WebFetch]);
    }
}
