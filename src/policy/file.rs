//! Policy files (YAML or JSON): tollgate's `permissions` block, or Claude Code's settings
//! `permissions` block unchanged, turned into typed rules that remember their file and line.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::decision::Decision;
use super::mode::PermissionMode;
use super::rule::{Rule, RuleKind};
use super::tool_name::ToolName;
use crate::config::{self, ConfigError, SourceLocation};
use crate::hooks::{Hook, HookList};
use crate::sandbox::{SandboxBlock, SandboxConfig};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    permissions: PermissionsBlock,
    /// Claude Code's `allowManagedPermissionRulesOnly`.
    #[serde(default, alias = "allowManagedPermissionRulesOnly")]
    managed_only: bool,
    #[serde(default)]
    disable_bypass_mode: bool,
    #[serde(default)]
    disable_auto_mode: bool,
    #[serde(default)]
    tests: Vec<Spanned<PolicyTestFile>>,
    #[serde(default)]
    hooks: HookList,
    /// Claude Code's `allowManagedHooksOnly`.
    #[serde(default, alias = "allowManagedHooksOnly")]
    managed_hooks_only: bool,
    #[serde(default)]
    sandbox: Option<SandboxBlock>,
}

/// A `permissions:` block, in a policy file or a task file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsBlock {
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyTestFile {
    name: Option<String>,
    tool: String,
    #[serde(default)]
    input: Value,
    expect: Decision,
    mode: Option<PermissionMode>,
}

/// A policy's self-test: the decision the policy must give for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyTest {
    pub name: String,
    /// `Other` when tollgate has no such tool: the test then fails, saying so.
    pub tool: ToolName,
    pub input: Value,
    pub expect: Decision,
    pub mode: Option<PermissionMode>,
    pub source: SourceLocation,
}

/// Where a policy's text came from: `file` names it in messages; `dir` (absolute) anchors
/// `/x` path rules and relative additional directories; `home` expands `~/`.
#[derive(Debug, Clone, Copy)]
pub struct PolicyOrigin<'a> {
    pub file: &'a Path,
    pub dir: &'a Path,
    pub home: Option<&'a Path>,
}

/// One loaded policy file (or a task's `permissions:` block, or the command line's rules).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub file: PathBuf,
    pub rules: Vec<Rule>,
    /// Absolute; relative entries are resolved against the policy file's folder.
    pub additional_directories: Vec<PathBuf>,
    pub default_mode: Option<PermissionMode>,
    pub managed_only: bool,
    pub disable_bypass: bool,
    pub disable_auto: bool,
    pub tests: Vec<PolicyTest>,
    pub hooks: Vec<Hook>,
    /// Only the managed policy's hooks run (meaningful in a managed policy only).
    pub managed_hooks_only: bool,
    /// The `sandbox:` block, if the file has one.
    pub sandbox: Option<SandboxConfig>,
}

impl Policy {
    pub fn parse(text: &str, origin: PolicyOrigin) -> Result<Policy, ConfigError> {
        let parsed: PolicyFile = config::parse(text, origin.file)?;
        let mut policy = Policy::from_block(parsed.permissions, origin)?;
        policy.managed_only = parsed.managed_only;
        policy.disable_bypass |= parsed.disable_bypass_mode;
        policy.disable_auto = parsed.disable_auto_mode;
        policy.managed_hooks_only = parsed.managed_hooks_only;
        policy.sandbox = parsed
            .sandbox
            .map(|block| block.into_config(origin.file))
            .transpose()?;
        policy.hooks = parsed
            .hooks
            .0
            .into_iter()
            .map(|spec| Hook {
                spec,
                source: origin.file.to_path_buf(),
            })
            .collect();
        policy.tests = parsed
            .tests
            .into_iter()
            .enumerate()
            .map(|(index, spanned)| {
                let test = spanned.value;
                PolicyTest {
                    name: test.name.unwrap_or_else(|| format!("test {}", index + 1)),
                    tool: ToolName::from_model(&test.tool),
                    input: test.input,
                    expect: test.expect,
                    mode: test.mode,
                    source: SourceLocation {
                        file: origin.file.to_path_buf(),
                        line: spanned.referenced.line(),
                    },
                }
            })
            .collect();
        Ok(policy)
    }

    /// A policy made of one `permissions:` block (a task file embeds one).
    pub fn from_block(
        block: PermissionsBlock,
        origin: PolicyOrigin,
    ) -> Result<Policy, ConfigError> {
        let file = origin.file;
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
                let rule =
                    Rule::parse(&spanned.value, kind, source, origin.dir).map_err(|err| {
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
            .map(|spanned| resolve_dir(&spanned.value, origin.dir, origin.home))
            .collect();
        Ok(Policy {
            file: file.to_path_buf(),
            rules,
            additional_directories,
            default_mode,
            managed_only: false,
            disable_bypass,
            disable_auto: false,
            tests: Vec::new(),
            hooks: Vec::new(),
            managed_hooks_only: false,
            sandbox: None,
        })
    }

    /// Rules given as command-line flags; `label` names them in decisions (`--allow #2`).
    pub fn from_flags(
        allow: &[String],
        deny: &[String],
        ask: &[String],
        dir: &Path,
    ) -> Result<Policy, super::rule::RuleError> {
        let mut rules = Vec::new();
        for (kind, texts, flag) in [
            (RuleKind::Deny, deny, "--deny"),
            (RuleKind::Ask, ask, "--ask"),
            (RuleKind::Allow, allow, "--allow"),
        ] {
            for (index, text) in texts.iter().enumerate() {
                let source = SourceLocation {
                    file: PathBuf::from(format!("<command line {flag}>")),
                    line: u64::try_from(index + 1).unwrap_or(u64::MAX),
                };
                rules.push(Rule::parse(text, kind, source, dir)?);
            }
        }
        Ok(Policy {
            file: PathBuf::from("<command line>"),
            rules,
            additional_directories: Vec::new(),
            default_mode: None,
            managed_only: false,
            disable_bypass: false,
            disable_auto: false,
            tests: Vec::new(),
            hooks: Vec::new(),
            managed_hooks_only: false,
            sandbox: None,
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
        Policy::parse(
            text,
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/etc/tg"),
                home: None,
            },
        )
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
        let origin = PolicyOrigin {
            file: Path::new("settings.json"),
            dir: Path::new("/p"),
            home: None,
        };
        let policy = Policy::parse(settings, origin).unwrap();
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
    fn self_tests_and_mode_switches_load() {
        let policy = parse(
            "disable_bypass_mode: true\ndisable_auto_mode: true\ntests:\n  - tool: Bash\n    input: {command: rm -rf /}\n    expect: deny\n  - name: reads\n    tool: Read\n    input: {file_path: a}\n    expect: allow\n    mode: plan\n",
        )
        .unwrap();
        assert!(policy.disable_bypass && policy.disable_auto);
        assert_eq!(policy.tests.len(), 2);
        assert_eq!(policy.tests[0].name, "test 1");
        assert_eq!(policy.tests[0].source.line, 4);
        assert_eq!(policy.tests[1].mode, Some(PermissionMode::Plan));
        let err = parse("tests:\n  - tool: Bash\n    expect: maybe\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
    }

    #[test]
    fn hooks_load_in_both_forms() {
        let policy = parse("managed_hooks_only: true\nhooks:\n  - {event: PreToolUse, matcher: Bash, command: ./check.sh}\n").unwrap();
        assert!(policy.managed_hooks_only);
        assert_eq!(policy.hooks.len(), 1);
        assert_eq!(policy.hooks[0].source, PathBuf::from("p.yaml"));
        let claude = r#"{"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}]}, "allowManagedHooksOnly": false}"#;
        assert_eq!(parse(claude).unwrap().hooks.len(), 1);
        let err =
            parse("hooks:\n  - {event: PreToolUse, matcher: 'Bash(x)', command: a}\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
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

    #[test]
    fn command_line_rules_name_their_flag() {
        let policy = Policy::from_flags(
            &["Bash(ls:*)".into()],
            &["WebFetch".into()],
            &[],
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            policy.rules[0].source.to_string(),
            "<command line --deny>:1"
        );
        assert!(Policy::from_flags(&["Bash(".into()], &[], &[], Path::new("/")).is_err());
    }
}
