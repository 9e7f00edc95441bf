//! Policy files (YAML or JSON): tollgate's `permissions` block, or Claude Code's settings
//! `permissions` block unchanged, turned into typed rules that remember their file and line.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::mode::PermissionMode;
use super::rule::{Rule, RuleKind};
use crate::config::{self, ConfigError, SourceLocation};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    permissions: PermissionsBlock,
    /// Claude Code's `allowManagedPermissionRulesOnly`.
    #[serde(default, alias = "allowManagedPermissionRulesOnly")]
    managed_only: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionsBlock {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default, alias = "additionalDirectories")]
    additional_directories: Vec<Spanned<String>>,
    #[serde(default, alias = "defaultMode")]
    default_mode: Option<Spanned<String>>,
    /// Claude Code's `disableBypassPermissionsMode: "disable"`.
    #[serde(default, rename = "disableBypassPermissionsMode")]
    disable_bypass_permissions_mode: Option<Spanned<String>>,
}

/// One loaded policy file.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub file: PathBuf,
    pub rules: Vec<Rule>,
    /// Absolute; relative entries are resolved against the policy file's folder.
    pub additional_directories: Vec<PathBuf>,
    pub default_mode: Option<PermissionMode>,
    pub managed_only: bool,
    pub disable_bypass: bool,
}

impl Policy {
    /// Parses a policy. `file` is how messages name it; `dir` is its folder, absolute, which
    /// anchors `/x` path rules and relative additional directories; `home` expands `~/`.
    pub fn parse(
        text: &str,
        file: &Path,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Policy, ConfigError> {
        let parsed: PolicyFile = config::parse(text, file)?;
        let block = parsed.permissions;
        let mut rules = Vec::new();
        for (kind, texts) in [
            (RuleKind::Deny, &block.deny),
            (RuleKind::Ask, &block.ask),
            (RuleKind::Allow, &block.allow),
        ] {
            for spanned in texts {
                let line = spanned.referenced.line();
                let source = SourceLocation {
                    file: file.to_path_buf(),
                    line,
                };
                let rule = Rule::parse(&spanned.value, kind, source, dir).map_err(|err| {
                    ConfigError::new(file, line, spanned.referenced.column(), err.to_string())
                })?;
                rules.push(rule);
            }
        }
        let default_mode = block
            .default_mode
            .map(|spanned| {
                spanned.value.parse::<PermissionMode>().map_err(|err| {
                    ConfigError::new(
                        file,
                        spanned.referenced.line(),
                        spanned.referenced.column(),
                        err.to_string(),
                    )
                })
            })
            .transpose()?;
        let disable_bypass = match block.disable_bypass_permissions_mode {
            None => false,
            Some(spanned) if spanned.value == "disable" => true,
            Some(spanned) => {
                return Err(ConfigError::new(
                    file,
                    spanned.referenced.line(),
                    spanned.referenced.column(),
                    format!(
                        "disableBypassPermissionsMode must be \"disable\", not `{}`",
                        spanned.value
                    ),
                ));
            }
        };
        let additional_directories = block
            .additional_directories
            .iter()
            .map(|spanned| resolve_dir(&spanned.value, dir, home))
            .collect();
        Ok(Policy {
            file: file.to_path_buf(),
            rules,
            additional_directories,
            default_mode,
            managed_only: parsed.managed_only,
            disable_bypass,
        })
    }
}

fn resolve_dir(entry: &str, policy_dir: &Path, home: Option<&Path>) -> PathBuf {
    match (entry.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => policy_dir.join(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tool_name::ToolName;

    fn parse(text: &str) -> Result<Policy, ConfigError> {
        Policy::parse(text, Path::new("p.yaml"), Path::new("/etc/tg"), None)
    }

    #[test]
    fn loads_tollgate_policy_with_rule_lines() {
        let policy = parse(
            "managed_only: true\npermissions:\n  allow:\n    - Read\n    - Bash(npm test:*)\n  deny:\n    - Bash(rm:*)\n  default_mode: dontAsk\n  additional_directories: [../shared]\n",
        )
        .unwrap();
        assert!(policy.managed_only);
        assert_eq!(policy.default_mode, Some(PermissionMode::DontAsk));
        assert_eq!(
            policy.additional_directories,
            vec![PathBuf::from("/etc/tg/../shared")]
        );
        let lines: Vec<(RuleKind, String, u64)> = policy
            .rules
            .iter()
            .map(|r| (r.kind, r.text.clone(), r.source.line))
            .collect();
        assert_eq!(
            lines,
            vec![
                (RuleKind::Deny, "Bash(rm:*)".into(), 7),
                (RuleKind::Allow, "Read".into(), 4),
                (RuleKind::Allow, "Bash(npm test:*)".into(), 5),
            ]
        );
    }

    #[test]
    fn loads_claude_code_settings_block_unchanged() {
        let settings = r#"{
  "permissions": {
    "allow": ["Bash(git diff:*)", "Edit(src/**)", "WebFetch(domain:docs.rs)", "WebSearch"],
    "deny": ["Bash(curl:*)", "Read(./.env)"],
    "ask": ["Bash(git push:*)"],
    "additionalDirectories": ["../docs/"],
    "defaultMode": "acceptEdits",
    "disableBypassPermissionsMode": "disable"
  },
  "allowManagedPermissionRulesOnly": false
}"#;
        let policy =
            Policy::parse(settings, Path::new("settings.json"), Path::new("/p"), None).unwrap();
        assert_eq!(policy.rules.len(), 7);
        assert!(policy.disable_bypass);
        assert_eq!(policy.default_mode, Some(PermissionMode::AcceptEdits));
        assert!(
            policy
                .rules
                .iter()
                .any(|r| r.tool == ToolName::Other("WebSearch".into()))
        );
    }

    #[test]
    fn bad_rules_and_modes_name_their_line() {
        let err = parse("permissions:\n  allow:\n    - Read\n    - Bash(git status\n").unwrap_err();
        assert_eq!((err.line, err.column), (4, 7));
        assert!(err.message.contains("not a rule"), "{err}");
        let err = parse("permissions:\n  default_mode: yolo\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("permissions:\n  allw: [Read]\n").unwrap_err();
        assert!(err.message.contains("unknown field"), "{err}");
    }
}
