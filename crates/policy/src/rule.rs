//! Permission rules (`Tool` or `Tool(content)`): parsed once when a policy loads, typed by the
//! tool they name, and carrying the file and line they came from.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::path_pattern::{PathPattern, PathPatternError};
use super::tool_name::ToolName;
use crate::config::SourceLocation;
use tollgate_bash::{CommandPattern, PatternError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    Allow,
    Ask,
    Deny,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        })
    }
}

/// What a rule's parenthesised content means, by the tool it names.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleContent {
    /// `Bash(npm test:*)`
    Command(CommandPattern),
    /// `Read(./src/**)`, `Edit(//tmp/**)`
    Path(PathPattern),
    /// `WebFetch(domain:*.example.com)`
    Domain(DomainPattern),
    /// Content tollgate compares literally (`Agent(Explore)`).
    Literal(String),
}

/// A host pattern: `example.com` exactly, or `*.example.com` where `*` is one label (a `*`
/// never crosses a dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPattern(Vec<String>);

impl DomainPattern {
    /// `example.com` or `*.example.com`; `None` when a label is empty or not a host label.
    /// The sandbox's proxy allowlist uses the same syntax as `WebFetch(domain:…)`.
    pub fn parse(host: &str) -> Option<DomainPattern> {
        let labels: Vec<String> = host.split('.').map(|l| l.to_ascii_lowercase()).collect();
        let well_formed = labels.iter().all(|label| {
            label == "*"
                || (!label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        });
        well_formed.then_some(DomainPattern(labels))
    }

    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let labels: Vec<&str> = host.split('.').collect();
        labels.len() == self.0.len()
            && self
                .0
                .iter()
                .zip(&labels)
                .all(|(want, got)| want == "*" || want == got)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub kind: RuleKind,
    pub tool: ToolName,
    pub content: Option<RuleContent>,
    /// The rule as written, for messages and reports.
    pub text: String,
    pub source: SourceLocation,
    /// An ask rule from a `defer:` list parks its call instead of refusing it.
    pub headless: super::HeadlessAnswer,
}

impl Rule {
    /// Whether this rule names the whole tool (no content).
    pub fn is_whole_tool(&self) -> bool {
        self.content.is_none()
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("`{0}` is not a rule: expected `Tool` or `Tool(content)`")]
    Syntax(String),
    #[error("`{0}` does not name a tool")]
    BadToolName(String),
    #[error("rule `{rule}`: {source}")]
    Command { rule: String, source: PatternError },
    #[error("rule `{rule}`: {source}")]
    Path {
        rule: String,
        source: PathPatternError,
    },
    #[error("rule `{0}`: expected `domain:host` or `domain:*.host`")]
    Domain(String),
    #[error("rule `{0}`: empty content; write the tool name alone to name the whole tool")]
    EmptyContent(String),
}

impl Rule {
    /// Parses `Tool` or `Tool(content)`. `policy_dir` anchors `/x` path patterns.
    pub fn parse(
        text: &str,
        kind: RuleKind,
        source: SourceLocation,
        policy_dir: &Path,
    ) -> Result<Rule, RuleError> {
        let trimmed = text.trim();
        let (name, content) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(RuleError::Syntax(text.to_string()));
                };
                (&trimmed[..open], Some(inner))
            }
            None if trimmed.contains(')') => return Err(RuleError::Syntax(text.to_string())),
            None => (trimmed, None),
        };
        let tool = ToolName::parse(name).ok_or_else(|| RuleError::BadToolName(name.to_string()))?;
        let content = match content {
            None => None,
            Some(inner) if inner.trim().is_empty() => {
                return Err(RuleError::EmptyContent(text.to_string()));
            }
            Some(inner) => Some(parse_content(&tool, inner, trimmed, policy_dir)?),
        };
        Ok(Rule {
            kind,
            tool,
            content,
            text: trimmed.to_string(),
            source,
            headless: super::HeadlessAnswer::Deny,
        })
    }
}

fn parse_content(
    tool: &ToolName,
    inner: &str,
    rule: &str,
    policy_dir: &Path,
) -> Result<RuleContent, RuleError> {
    Ok(match tool {
        ToolName::Bash => RuleContent::Command(CommandPattern::parse(inner).map_err(|source| {
            RuleError::Command {
                rule: rule.to_string(),
                source,
            }
        })?),
        tool if tool.is_file_reader() || tool.is_file_writer() => {
            RuleContent::Path(PathPattern::parse(inner, policy_dir).map_err(|source| {
                RuleError::Path {
                    rule: rule.to_string(),
                    source,
                }
            })?)
        }
        ToolName::WebFetch => {
            let host = inner
                .strip_prefix("domain:")
                .filter(|host| !host.is_empty())
                .ok_or_else(|| RuleError::Domain(rule.to_string()))?;
            RuleContent::Domain(
                DomainPattern::parse(host).ok_or_else(|| RuleError::Domain(rule.to_string()))?,
            )
        }
        // Claude Code's general sub-agent is `general-purpose`: its settings deny
        // `Task(general-purpose)`, and that deny must reach tollgate's `general`.
        ToolName::Agent if inner.trim().eq_ignore_ascii_case("general-purpose") => {
            RuleContent::Literal("general".to_string())
        }
        _ => RuleContent::Literal(inner.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Rule, RuleError> {
        let source = SourceLocation {
            file: "p.yaml".into(),
            line: 3,
        };
        Rule::parse(text, RuleKind::Allow, source, Path::new("/etc/tollgate"))
    }

    #[test]
    fn parses_each_content_kind() {
        let rule = parse("Bash(npm test:*)").unwrap();
        assert_eq!(rule.tool, ToolName::Bash);
        assert!(matches!(
            rule.content,
            Some(RuleContent::Command(CommandPattern::Prefix(_)))
        ));
        assert!(matches!(
            parse("Edit(src/**)").unwrap().content,
            Some(RuleContent::Path(_))
        ));
        assert!(matches!(
            parse("Grep(./src)").unwrap().content,
            Some(RuleContent::Path(_))
        ));
        assert!(matches!(
            parse("WebFetch(domain:*.example.com)").unwrap().content,
            Some(RuleContent::Domain(_))
        ));
        assert_eq!(
            parse("Agent(Explore)").unwrap().content,
            Some(RuleContent::Literal("Explore".into()))
        );
        assert_eq!(
            parse("Task(general-purpose)").unwrap().content,
            Some(RuleContent::Literal("general".into()))
        );
        let whole = parse("  Bash ").unwrap();
        assert!(whole.is_whole_tool());
        assert_eq!(whole.text, "Bash");
    }

    #[test]
    fn malformed_rules_are_errors() {
        for bad in [
            "Bash(git status",
            "Bash)",
            "Bash()",
            "Ba sh",
            "(x)",
            "WebFetch(example.com)",
            "WebFetch(domain:exa mple.com)",
            "Read(src/[)",
            "Bash('unbalanced)",
        ] {
            assert!(parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn domain_wildcards_never_cross_dots() {
        let Some(RuleContent::Domain(domain)) =
            parse("WebFetch(domain:*.example.com)").unwrap().content
        else {
            panic!("not a domain rule");
        };
        assert!(domain.matches("docs.example.com"));
        assert!(domain.matches("DOCS.Example.com."));
        assert!(!domain.matches("a.b.example.com"));
        assert!(!domain.matches("example.com"));
        assert!(!domain.matches("evilexample.com"));
    }
}
