use super::*;
use crate::base::DEFAULT_MAX_PARALLEL_TOOLS;
use crate::model::{Pricing, ScriptedBlock, Streaming, Timeouts};

const MINIMAL: &str = "version: 1\nname: t\nprompt: do it\nmodel:\n  provider: scripted\n  script:\n    - - text: done\n";

const REAL: &str = "version: 1\nname: t\nprompt: do it\nmodel:\n  provider: openai\n  name: my-local-model\n  base_url: http://127.0.0.1:1/v1/\n";

fn parse(text: &str) -> Result<Task, ConfigError> {
    Task::parse(text, Path::new("task.yaml"), Path::new("/tasks"), None)
}

#[test]
fn agent_and_skill_are_named_to_be_had_and_skills_need_the_skill_tool() {
    let task = parse(MINIMAL).unwrap();
    assert!(!task.tools.contains(&ToolName::Agent));
    assert_eq!(task.subagent_max_turns, DEFAULT_SUBAGENT_MAX_TURNS);
    let task = parse(&format!(
        "{MINIMAL}tools: [Read, Agent, Skill]\nskills: [../team-skills]\nsubagents:\n  max_turns: 3\n"
    ))
    .unwrap();
    assert_eq!(task.skills, [PathBuf::from("/team-skills")]);
    assert_eq!(task.subagent_max_turns, 3);
    assert_eq!(task.subagent_max_per_turn, DEFAULT_SUBAGENT_MAX_PER_TURN);
    let err = parse(&format!("{MINIMAL}skills: [x]\n")).unwrap_err();
    assert_eq!(
        err.headline(),
        "task.yaml:8:10: skills: needs the Skill tool: add Skill to tools:"
    );
}

#[test]
fn max_parallel_tools_is_at_least_one() {
    let task = parse(&format!("{MINIMAL}limits:\n  max_parallel_tools: 3\n")).unwrap();
    assert_eq!(task.limits.max_parallel_tools, 3);
    let err = parse(&format!("{MINIMAL}limits:\n  max_parallel_tools: 0\n")).unwrap_err();
    assert!(
        err.to_string()
            .contains("max_parallel_tools must be at least 1"),
        "{err}"
    );
}

#[test]
fn economy_keys_parse_and_refuse_what_cannot_work() {
    let task = parse(&format!(
        "{MINIMAL}deferred_tools: [TodoWrite]\nreminders: {{full_every: 3}}\nlimits:\n  message_result_chars: 1000\n  max_result_chars: {{Bash: 500}}\n"
    ))
    .unwrap();
    assert_eq!(
        task.deferred_tools,
        [ToolName::WebFetch, ToolName::TodoWrite]
    );
    assert_eq!(task.reminders_full_every, 3);
    assert_eq!(task.limits.message_result_chars, 1000);
    assert_eq!(task.max_result_chars, [(ToolName::Bash, 500)]);
    let defaults = parse(MINIMAL).unwrap();
    assert_eq!(defaults.deferred_tools, [ToolName::WebFetch]);
    assert_eq!(
        defaults.limits.message_result_chars,
        DEFAULT_MESSAGE_RESULT_CHARS
    );
    // (the task's extra lines, what the error says)
    let refused = [
        ("deferred_tools: [Bash]\n", "Bash is never deferred"),
        ("deferred_tools: [Nope]\n", "unknown tool `Nope`"),
        (
            "reminders: {full_every: 0}\n",
            "full_every must be at least 1",
        ),
        (
            "limits: {max_result_chars: {Read: 10}}\n",
            "Read is never offloaded",
        ),
        (
            "limits: {max_result_chars: {Bash: 0}}\n",
            "max_result_chars.Bash must be at least 1",
        ),
        (
            "limits: {message_result_chars: 0}\n",
            "message_result_chars must be at least 1",
        ),
    ];
    for (extra, says) in refused {
        let err = parse(&format!("{MINIMAL}{extra}")).unwrap_err();
        assert!(err.to_string().contains(says), "{extra}: {err}");
    }
}

#[test]
fn minimal_task_gets_defaults() {
    let task = parse(MINIMAL).unwrap();
    assert_eq!(task.limits.max_turns, DEFAULT_MAX_TURNS);
    assert_eq!(task.limits.max_parallel_tools, DEFAULT_MAX_PARALLEL_TOOLS);
    assert_eq!(task.tools, default_tools());
    assert_eq!(
        task.script,
        Some(ScriptedTurns(vec![vec![ScriptedBlock::Text(
            "done".into()
        )]]))
    );
    assert_eq!(task.mode, None);
}

#[test]
fn full_task() {
    let task = parse(
        "version: 1\nname: t\nprompt: p\nmode: dontAsk\npolicy: ../p.yaml\nworkdir: ws\ntools: [Read, Bash]\nlimits:\n  max_turns: 3\nchecks:\n  - name: c\n    run: 'true'\n    expect_exit: 1\nmodel:\n  provider: scripted\n  script:\n    - - tool_use: {name: Read, input: {file_path: a}}\n    - - text: ok\n",
    )
    .unwrap();
    assert_eq!(task.mode, Some(PermissionMode::DontAsk));
    assert_eq!(task.permissions, None);
    assert_eq!(task.policy, Some(PathBuf::from("/p.yaml")));
    assert_eq!(task.workdir, Some(PathBuf::from("/tasks/ws")));
    assert_eq!(task.tools, vec![ToolName::Read, ToolName::Bash]);
    assert_eq!(task.limits.max_turns, 3);
    assert_eq!(task.checks[0].expect_exit, 1);
}

#[test]
fn real_providers_get_their_settings() {
    let task = parse(&format!(
        "{REAL}  api_key_env: LOCAL_KEY\n  pricing: {{input: 1, output: 2}}\n  timeouts: {{connect: 0.5, idle: 2}}\n  retries: {{max: 2, base_delay: 0.01}}\nlimits:\n  max_cost_usd: 0.5\n  max_output_tokens: 1000\n  timeout: 60\n  tool_timeout: 1.5\n"
    ))
    .unwrap();
    let model = &task.model;
    assert_eq!(model.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
    assert_eq!(model.stream, Streaming::Auto);
    for (written, stream) in [
        ("true", Streaming::Always),
        ("false", Streaming::Never),
        ("auto", Streaming::Auto),
    ] {
        let yaml = REAL.replace(
            "name: my-local-model",
            &format!("name: m\n  stream: {written}"),
        );
        assert_eq!(parse(&yaml).unwrap().model.stream, stream, "{written}");
    }
    assert_eq!(model.api_key_variable(), Some(("LOCAL_KEY", true)));
    assert_eq!(model.pricing().map(|p| p.output), Some(2.0));
    assert_eq!(model.timeouts.connect, Duration::from_millis(500));
    assert_eq!(model.timeouts.first_event, Timeouts::default().first_event);
    assert_eq!(model.retries.max, 2);
    assert_eq!(model.retries.base_delay, Duration::from_millis(10));
    assert_eq!(task.limits.max_cost_usd, Some(0.5));
    assert_eq!(task.limits.max_output_tokens, Some(1000));
    assert_eq!(task.limits.max_input_tokens, None);
    assert_eq!(task.limits.timeout, Some(Duration::from_secs(60)));
    assert_eq!(task.limits.tool_timeout, Some(Duration::from_millis(1500)));

    let local = parse(REAL).unwrap();
    assert_eq!(
        local.model.api_key_variable(),
        Some(("OPENAI_API_KEY", false))
    );
    assert_eq!(local.model.pricing(), None);
    let claude = parse(
        "version: 1\nname: t\nprompt: p\nmodel:\n  provider: anthropic\n  name: claude-sonnet-4-5-20250929\n",
    )
    .unwrap();
    assert_eq!(
        claude.model.api_key_variable(),
        Some(("ANTHROPIC_API_KEY", true))
    );
    assert_eq!(claude.model.pricing().map(|p| p.input), Some(3.0));
    assert_eq!(parse(MINIMAL).unwrap().model.pricing(), Some(Pricing::FREE));
}

#[test]
fn fail_on_retry_and_redact_env() {
    let task = parse(&format!(
        "{MINIMAL}fail_on: [check, denial]\nredact_env: [DB_URL]\nchecks:\n  - name: tests\n    run: 'true'\n    retry: {{max_attempts: 3, feed_back: true}}\n  - name: lint\n    run: 'true'\n"
    ))
    .unwrap();
    assert_eq!(task.fail_on.kinds(), [FailOn::Denial, FailOn::Check]);
    assert_eq!(task.redact_env, ["DB_URL"]);
    assert_eq!(
        task.checks[0].retry,
        Retry {
            max_attempts: 3,
            feed_back: true
        }
    );
    assert_eq!(task.checks[0].line, 11);
    assert_eq!(task.checks[1].retry, Retry::default());
    assert_eq!(parse(MINIMAL).unwrap().fail_on, FailOnSet::task_default());
    let none = parse(&format!("{MINIMAL}fail_on: []\n")).unwrap();
    assert_eq!(none.fail_on, FailOnSet::none());
}

#[test]
fn permissions_block_becomes_a_policy() {
    let task = parse(&format!(
        "{MINIMAL}permissions:\n  allow: [Bash]\n  deny: ['Bash(rm:*)']\n"
    ))
    .unwrap();
    let permissions = task.permissions.unwrap();
    assert_eq!(permissions.rules.len(), 2);
    assert_eq!(permissions.rules[0].source.line, 10);
    let err = parse(&format!("{MINIMAL}permissions:\n  allow: ['Bash(']\n")).unwrap_err();
    assert_eq!(err.line, 9);
}

#[test]
fn errors_are_located() {
    let cases = [
        (
            MINIMAL.replace("version: 1", "version: 2"),
            1,
            "unsupported task version",
        ),
        (format!("{MINIMAL}bogus: 1\n"), 8, "unknown field `bogus`"),
        (
            MINIMAL.replace("prompt: do it\n", ""),
            0,
            "missing field `prompt`",
        ),
        (format!("{MINIMAL}mode: yolo\n"), 8, "unknown value"),
        (
            format!("{MINIMAL}tools: [Read, Nope]\n"),
            8,
            "unknown tool `Nope`",
        ),
        (
            MINIMAL
                .replace("provider: scripted", "provider: anthropic")
                .replace("  script:\n    - - text: done\n", ""),
            5,
            "needs `name:`",
        ),
        (
            MINIMAL.replace(
                "provider: scripted",
                "provider: scripted\n  base_url: http://x",
            ),
            6,
            "not scripted",
        ),
        (
            MINIMAL.replace(
                "provider: scripted",
                "provider: scripted\n  fallback: other",
            ),
            6,
            "not scripted",
        ),
        (
            REAL.replace("name: my-local-model", "name: m\n  fallback: m"),
            7,
            "must name another model",
        ),
        (
            REAL.replace("name: my-local-model", "name: m\n  stream: maybe"),
            7,
            "model.stream must be true, false or auto, not `maybe`",
        ),
        (
            MINIMAL.replace("provider: scripted", "provider: scripted\n  stream: false"),
            6,
            "model.stream is for the openai provider",
        ),
        (
            format!("{MINIMAL}limits:\n  max_denials: 0\n"),
            9,
            "max_denials must be at least 1",
        ),
        (
            format!("{MINIMAL}limits:\n  timeout: -1\n"),
            9,
            "positive number of seconds",
        ),
        (
            format!("{REAL}limits:\n  max_cost_usd: 1\n"),
            9,
            "does not know",
        ),
        (
            REAL.replace("name: my-local-model", "name: m\n  thinking_budget: 10"),
            7,
            "thinking_budget is for the anthropic provider",
        ),
        (
            format!("{REAL}  timeouts: {{idle: 0}}\n"),
            8,
            "timeouts.idle must be a positive",
        ),
        (
            format!("{REAL}  retries: {{maximum: 3}}\n"),
            8,
            "unknown field `maximum`",
        ),
        (
            MINIMAL.replace("text: done", "txt: done"),
            7,
            "unknown value",
        ),
        (
            format!("{MINIMAL}limits:\n  max_turns: 0\n"),
            9,
            "at least 1",
        ),
        (format!("{MINIMAL}fail_on: [denials]\n"), 8, "unknown value"),
        (
            format!("{MINIMAL}checks:\n  - name: c\n    run: x\n    retry: {{max_attempts: 0}}\n"),
            11,
            "retry.max_attempts must be from 1 to 100",
        ),
        (
            format!(
                "{MINIMAL}checks:\n  - name: c\n    run: x\n    retry: {{max_attempts: 4294967295}}\n"
            ),
            11,
            "retry.max_attempts must be from 1 to 100",
        ),
    ];
    for (text, line, message) in cases {
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains(message), "{err} should say {message}");
        if line > 0 {
            assert_eq!(err.line, line, "{err}");
            assert!(err.column > 0, "{err}");
        }
    }
}

/// docs/reliability.md lists each knob's maximum as the loader checks it.
#[test]
fn the_docs_list_the_maxima() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reliability.md"
    ))
    .unwrap();
    for row in [
        format!(
            "| `model.timeouts.connect`, `first_event`, `idle`, `request` | {} s |",
            maxima::MODEL_TIMEOUT.as_secs()
        ),
        format!(
            "| `model.retries.base_delay`, `max_delay` | {} s |",
            maxima::RETRY_DELAY.as_secs()
        ),
        format!("| `model.retries.max` | {} |", maxima::PROVIDER_RETRIES),
        format!("| `limits.timeout` | {} s |", maxima::RUN_TIMEOUT.as_secs()),
        format!(
            "| `limits.tool_timeout` | {} s |",
            maxima::TOOL_TIMEOUT.as_secs()
        ),
        format!(
            "| `limits.max_parallel_tools` | {} |",
            maxima::PARALLEL_TOOLS
        ),
        format!(
            "| a check's `timeout` | {} s |",
            maxima::TOOL_TIMEOUT.as_secs()
        ),
        format!(
            "| a check's `retry.max_attempts` | {} |",
            maxima::CHECK_ATTEMPTS
        ),
        format!(
            "| a hook's `timeout` (policy) | {} s |",
            crate::hooks::MAX_TIMEOUT_SECS
        ),
    ] {
        assert!(docs.contains(&row), "docs/reliability.md lacks {row}");
    }
    assert!(docs.contains(&format!(
        "estimated at **{} bytes a token**",
        crate::model::ESTIMATE_BYTES_PER_TOKEN
    )));
}
