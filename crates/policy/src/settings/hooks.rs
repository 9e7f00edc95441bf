//! Hooks as a policy file writes them (`hooks: [{event, matcher, command, timeout, on_error}]`),
//! the tool-name matcher syntax, and which policies' hooks count under `managed_hooks_only`.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

use super::ignored_key::IgnoredKey;
use tollgate_base::wildcard_match;

/// The longest timeout a hook may be given: a day.
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// Seconds a hook may run when its spec names no timeout (Claude Code's default too).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// One hook as written in a policy file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    pub event: HookEvent,
    /// Which tools the hook runs for; `None` (or `*`, or an empty string) means every tool.
    #[serde(default)]
    pub matcher: Option<ToolMatcher>,
    /// Run with `bash -c` in the run's working directory.
    #[serde(deserialize_with = "non_blank")]
    pub command: String,
    /// Seconds; `None` means [`DEFAULT_TIMEOUT_SECS`]. Zero is refused: it could never run.
    #[serde(default, deserialize_with = "positive_seconds")]
    pub timeout: Option<u64>,
    #[serde(default)]
    pub on_error: OnError,
}

impl HookSpec {
    pub fn timeout_secs(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)
    }

    /// Whether this hook runs for `event` on `subject` (the tool's name, or SessionStart's
    /// source); the matcher of an event that has none is not consulted.
    pub fn applies_to(&self, event: HookEvent, subject: &str) -> bool {
        self.event == event
            && (!event.has_matcher()
                || self
                    .matcher
                    .as_ref()
                    .is_none_or(|matcher| matcher.matches(subject)))
    }
}

/// The Claude Code hook events a headless run has a moment for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    /// A call the run would have to ask a person about (headless: it would be denied).
    PermissionRequest,
    /// A call was denied.
    PermissionDenied,
    /// Before the first model call; its matcher is the start's source (`startup`).
    SessionStart,
    /// The task's prompt, before the model sees it.
    UserPromptSubmit,
    /// The model ended its turn without a tool call; the hook may send it back to work.
    Stop,
    /// A sub-agent ended; the hook may send it back to work.
    SubagentStop,
    /// The run is over (nothing can be blocked any more).
    SessionEnd,
    /// Before the history is compacted; its matcher is the trigger (`auto`).
    PreCompact,
}

/// Claude Code events with no moment in a headless run: their hooks load and are listed in
/// `ignored_keys`, with why.
pub const IGNORED_EVENTS: &[(&str, &str)] = &[(
    "Notification",
    "it notifies a person at the terminal (permission prompts, idle input); a headless run has neither",
)];

impl HookEvent {
    pub const ALL: [HookEvent; 10] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PermissionRequest,
        HookEvent::PermissionDenied,
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PermissionDenied => "PermissionDenied",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
        }
    }

    /// Whether a hook's matcher selects among this event's occurrences (a tool name, or
    /// SessionStart's source); Claude Code ignores the matcher of the others.
    pub fn has_matcher(self) -> bool {
        match self {
            HookEvent::PreToolUse
            | HookEvent::PostToolUse
            | HookEvent::PermissionRequest
            | HookEvent::PermissionDenied
            | HookEvent::SessionStart
            | HookEvent::PreCompact => true,
            HookEvent::UserPromptSubmit
            | HookEvent::Stop
            | HookEvent::SubagentStop
            | HookEvent::SessionEnd => false,
        }
    }

    /// Events about one tool call (their input names the tool and its input).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PermissionRequest
                | HookEvent::PermissionDenied
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hook that crashed, timed out, printed garbage or could not start amounts to.
/// Unlike Claude Code (where such a hook is a non-blocking error), the default fails closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    #[default]
    Deny,
    Ignore,
}

/// A tool-name matcher: `|`-separated alternatives, each an exact, case-sensitive tool name
/// in which `*` stands for any run of characters (`Bash`, `Edit|Write`, `mcp__github__*`).
/// `*` or the empty string matches every tool. Regular expressions are refused rather than
/// read as names, so Claude Code's `mcp__.*` fails at load time instead of silently matching
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ToolMatcher {
    text: String,
    alternatives: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "matcher `{text}`: `{alternative}` is not a tool name; write exact names with `*` wildcards \
     separated by `|` (e.g. `Edit|Write`, `mcp__github__*`); regular expressions are not supported"
)]
pub struct MatcherError {
    pub text: String,
    pub alternative: String,
}

impl ToolMatcher {
    pub fn parse(text: &str) -> Result<ToolMatcher, MatcherError> {
        let trimmed = text.trim();
        let alternatives: Vec<String> = if trimmed.is_empty() {
            vec!["*".to_string()]
        } else {
            trimmed
                .split('|')
                .map(|alt| alt.trim().to_string())
                .collect()
        };
        for alternative in &alternatives {
            let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*');
            if alternative.is_empty() || !alternative.chars().all(is_name_char) {
                return Err(MatcherError {
                    text: text.to_string(),
                    alternative: alternative.clone(),
                });
            }
        }
        Ok(ToolMatcher {
            text: text.to_string(),
            alternatives,
        })
    }

    pub fn matches(&self, tool_name: &str) -> bool {
        self.alternatives
            .iter()
            .any(|pattern| wildcard_match(pattern, tool_name))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl TryFrom<String> for ToolMatcher {
    type Error = MatcherError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        ToolMatcher::parse(&text)
    }
}

impl fmt::Display for ToolMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn non_blank<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let command = String::deserialize(deserializer)?;
    if command.trim().is_empty() {
        return Err(serde::de::Error::custom(
            "a hook's command must not be empty",
        ));
    }
    Ok(command)
}

fn positive_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(deserializer)? {
        Some(secs) if secs == 0 || secs > MAX_TIMEOUT_SECS => Err(serde::de::Error::custom(
            format!("a hook's timeout is in seconds, from 1 to {MAX_TIMEOUT_SECS}"),
        )),
        other => Ok(other),
    }
}

/// A policy's `hooks` value in either form: tollgate's list of [`HookSpec`]s, or Claude
/// Code's settings map (`{"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
/// "command": "…", "timeout": 30}]}]}`), so a Claude Code settings file loads unchanged.
/// Hooks from the map form take `on_error: deny`. Events with no moment in a headless run
/// ([`IGNORED_EVENTS`]) load into `ignored`, said with why; an unknown event and hook fields
/// tollgate does not honour (`async`, `type: prompt`) are refused rather than skipped: a
/// policy author must not believe a hook runs when it does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookList {
    pub specs: Vec<HookSpec>,
    /// Events of the map form that are ignored, with why.
    pub ignored: Vec<IgnoredKey>,
}

impl<'de> Deserialize<'de> for HookList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HookListVisitor)
    }
}

struct HookListVisitor;

impl<'de> serde::de::Visitor<'de> for HookListVisitor {
    type Value = HookList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of hooks, or Claude Code's map of events to matcher groups")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<HookList, A::Error> {
        let mut specs = Vec::new();
        while let Some(spec) = seq.next_element::<HookSpec>()? {
            specs.push(spec);
        }
        Ok(HookList {
            specs,
            ignored: Vec::new(),
        })
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<HookList, A::Error> {
        let mut list = HookList::default();
        while let Some(event) = map.next_key::<MapEvent>()? {
            let event = match event {
                MapEvent::Run(event) => event,
                MapEvent::Ignored(name, why) => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    list.ignored
                        .push(IgnoredKey::new(format!("hooks.{name}"), why));
                    continue;
                }
            };
            for group in map.next_value::<Vec<MatcherGroup>>()? {
                list.specs
                    .extend(group.hooks.into_iter().map(|command| HookSpec {
                        event,
                        matcher: group.matcher.clone(),
                        command: command.command,
                        timeout: command.timeout,
                        on_error: OnError::default(),
                    }));
            }
        }
        Ok(list)
    }
}

/// A key of the map form: an event that runs, or one that is ignored (name, why).
enum MapEvent {
    Run(HookEvent),
    Ignored(&'static str, &'static str),
}

impl<'de> Deserialize<'de> for MapEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if let Some((name, why)) = IGNORED_EVENTS.iter().find(|(known, _)| *known == name) {
            return Ok(MapEvent::Ignored(name, why));
        }
        HookEvent::ALL
            .into_iter()
            .find(|event| event.as_str() == name)
            .map(MapEvent::Run)
            .ok_or_else(|| {
                const NAMES: &[&str] = &[
                    "PreToolUse",
                    "PostToolUse",
                    "PermissionRequest",
                    "PermissionDenied",
                    "SessionStart",
                    "UserPromptSubmit",
                    "Stop",
                    "SubagentStop",
                    "SessionEnd",
                    "PreCompact",
                    "Notification",
                ];
                serde::de::Error::unknown_variant(&name, NAMES)
            })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatcherGroup {
    #[serde(default)]
    matcher: Option<ToolMatcher>,
    /// An annotation for people (Claude Code shows it in `/hooks`); grants nothing.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "read so that the annotation loads; it means nothing"
    )]
    description: Option<String>,
    hooks: Vec<CommandHook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandHook {
    #[serde(rename = "type")]
    #[expect(
        dead_code,
        reason = "read only so that hook types other than `command` are refused"
    )]
    kind: CommandKind,
    #[serde(deserialize_with = "non_blank")]
    command: String,
    #[serde(default, deserialize_with = "positive_seconds")]
    timeout: Option<u64>,
}

/// Claude Code's other hook kinds (`prompt`, `agent`, `http`) are refused by serde.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum CommandKind {
    Command,
}

/// A hook with the policy file it came from, for messages and the transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub spec: HookSpec,
    pub source: PathBuf,
}

/// The hooks in force for a run: the managed policy's first, then the others' in the order
/// given. With `managed_hooks_only` (Claude Code's `allowManagedHooksOnly`) the others' hooks
/// do not run at all — a task file from a pull request cannot add a hook that allows.
pub fn merge_hooks(managed: &[Hook], managed_hooks_only: bool, others: &[Hook]) -> Vec<Hook> {
    let mut hooks = managed.to_vec();
    if !managed_hooks_only {
        hooks.extend(others.iter().cloned());
    }
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{self, ConfigError};
    use std::path::Path;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Block {
        hooks: Vec<HookSpec>,
    }

    fn parse(text: &str) -> Result<Vec<HookSpec>, ConfigError> {
        config::parse::<Block>(text, Path::new("p.yaml")).map(|block| block.hooks)
    }

    #[test]
    fn parses_a_full_spec_and_defaults() {
        let hooks = parse(
            "hooks:\n  - event: PreToolUse\n    matcher: Edit|Write\n    command: ./check.sh\n    timeout: 5\n    on_error: ignore\n  - event: PostToolUse\n    command: ./log.sh\n",
        )
        .unwrap();
        assert_eq!(
            hooks,
            vec![
                HookSpec {
                    event: HookEvent::PreToolUse,
                    matcher: Some(ToolMatcher::parse("Edit|Write").unwrap()),
                    command: "./check.sh".into(),
                    timeout: Some(5),
                    on_error: OnError::Ignore,
                },
                HookSpec {
                    event: HookEvent::PostToolUse,
                    matcher: None,
                    command: "./log.sh".into(),
                    timeout: None,
                    on_error: OnError::Deny,
                },
            ]
        );
        assert_eq!(hooks[1].timeout_secs(), DEFAULT_TIMEOUT_SECS);
    }

    #[test]
    fn bad_specs_are_refused_at_their_line() {
        let err = parse("hooks:\n  - event: PreToolUse\n    matcher: mcp__.*\n    command: x\n")
            .unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("regular expressions"), "{err}");
        let err = parse("hooks:\n  - event: Notification\n    command: x\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err =
            parse("hooks:\n  - event: PreToolUse\n    command: x\n    when: now\n").unwrap_err();
        assert!(err.message.contains("unknown field"), "{err}");
        let err =
            parse("hooks:\n  - event: PreToolUse\n    command: x\n    timeout: 0\n").unwrap_err();
        assert!(err.message.contains("from 1 to 86400"), "{err}");
        let err = parse(
            "hooks:\n  - event: PreToolUse\n    command: x\n    timeout: 18446744073709551615\n",
        )
        .unwrap_err();
        assert!(err.message.contains("from 1 to 86400"), "{err}");
        let err = parse("hooks:\n  - event: PreToolUse\n    command: '  '\n").unwrap_err();
        assert!(err.message.contains("must not be empty"), "{err}");
        let err = parse("hooks:\n  - event: PreToolUse\n    command: x\n    on_error: allow\n")
            .unwrap_err();
        assert_eq!(err.line, 4, "{err}");
    }

    #[test]
    fn matcher_syntax() {
        let cases: &[(&str, &str, bool)] = &[
            ("Bash", "Bash", true),
            ("Bash", "BashOutput", false),
            ("Bash", "bash", false),
            ("Edit|Write", "Write", true),
            ("Edit | Write", "Edit", true),
            ("Edit|Write", "Read", false),
            ("*", "anything", true),
            ("", "Read", true),
            ("mcp__*", "mcp__github__create_issue", true),
            ("mcp__*", "Read", false),
            ("mcp__*__create_*", "mcp__github__create_issue", true),
            ("mcp__*__create_*", "mcp__github__delete_issue", false),
            ("*Output", "BashOutput", true),
            ("a*a", "a", false),
            ("a*a", "aa", true),
        ];
        for &(pattern, tool, expected) in cases {
            let matcher = ToolMatcher::parse(pattern).unwrap();
            assert_eq!(matcher.matches(tool), expected, "{pattern:?} vs {tool}");
        }
        for bad in [
            "mcp__.*",
            "Notebook.*",
            "Bash(git:*)",
            "Edit||Write",
            "[A-Z]",
        ] {
            assert!(ToolMatcher::parse(bad).is_err(), "{bad}");
        }
    }

    #[derive(Debug, Deserialize)]
    struct Settings {
        hooks: HookList,
    }

    #[test]
    fn claude_code_settings_map_loads_as_the_same_hooks() {
        let settings = r#"{
  "hooks": {
    "PreToolUse": [
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "./fmt-check.sh", "timeout": 30}]},
      {"hooks": [{"type": "command", "command": "./audit.sh"}]}
    ],
    "PostToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./scan.sh"}]}
    ]
  }
}"#;
        let map = config::parse::<Settings>(settings, Path::new("settings.json"))
            .unwrap()
            .hooks;
        let list = config::parse::<Settings>(
            "hooks:\n  - {event: PreToolUse, matcher: Edit|Write, command: ./fmt-check.sh, timeout: 30}\n  - {event: PreToolUse, command: ./audit.sh}\n  - {event: PostToolUse, matcher: Bash, command: ./scan.sh}\n",
            Path::new("p.yaml"),
        )
        .unwrap()
        .hooks;
        assert_eq!(map, list);
        assert_eq!(map.specs.len(), 3);
        for (refused, says) in [
            (
                r#"{"hooks": {"Stopp": [{"hooks": [{"type": "command", "command": "x"}]}]}}"#,
                "unknown value `Stopp`",
            ),
            (
                r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}"#,
                "unknown value `prompt`",
            ),
            (
                r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "async": true}]}]}}"#,
                "unknown field `async`",
            ),
            (
                r#"{"hooks": {"PreToolUse": [{"matcher": "Notebook.*", "hooks": [{"type": "command", "command": "x"}]}]}}"#,
                "regular expressions are not supported",
            ),
            (r#"{"hooks": 5}"#, "expected a list of hooks"),
        ] {
            let err = config::parse::<Settings>(refused, Path::new("settings.json")).unwrap_err();
            assert!(
                err.message.contains(says) && err.line == 1,
                "{refused}: {err}"
            );
        }
    }

    /// Every event Claude Code documents either loads as a hook that runs, or (Notification)
    /// loads, is listed with why, and runs nothing; a matcher entry's `description` loads.
    #[test]
    fn claude_code_events_load_or_are_listed_as_ignored() {
        let group = r#"[{"matcher": "startup", "description": "why it is here", "hooks": [{"type": "command", "command": "x"}]}]"#;
        let mut events: Vec<String> = HookEvent::ALL.iter().map(|e| e.to_string()).collect();
        events.push("Notification".into());
        let body: Vec<String> = events.iter().map(|e| format!("\"{e}\": {group}")).collect();
        let settings = format!("{{\"hooks\": {{{}}}}}", body.join(", "));
        let list = config::parse::<Settings>(&settings, Path::new("settings.json"))
            .unwrap()
            .hooks;
        let loaded: Vec<HookEvent> = list.specs.iter().map(|spec| spec.event).collect();
        assert_eq!(loaded, HookEvent::ALL);
        assert_eq!(list.ignored.len(), 1);
        assert_eq!(list.ignored[0].key, "hooks.Notification");
        // A matcher selects only where the event has one: Stop's runs whatever it says.
        let stop = &list.specs[6];
        assert_eq!(stop.event, HookEvent::Stop);
        assert!(stop.applies_to(HookEvent::Stop, ""));
        let start = &list.specs[4];
        assert!(start.applies_to(HookEvent::SessionStart, "startup"));
        assert!(!start.applies_to(HookEvent::SessionStart, "resume"));
    }

    #[test]
    fn managed_hooks_only_drops_the_others() {
        let hook = |command: &str, source: &str| Hook {
            spec: HookSpec {
                event: HookEvent::PreToolUse,
                matcher: None,
                command: command.into(),
                timeout: None,
                on_error: OnError::Deny,
            },
            source: source.into(),
        };
        let managed = [hook("m", "managed.yaml")];
        let others = [hook("t", "task.yaml")];
        let commands = |hooks: Vec<Hook>| -> Vec<String> {
            hooks.into_iter().map(|h| h.spec.command).collect()
        };
        assert_eq!(commands(merge_hooks(&managed, false, &others)), ["m", "t"]);
        assert_eq!(commands(merge_hooks(&managed, true, &others)), ["m"]);
    }
}
