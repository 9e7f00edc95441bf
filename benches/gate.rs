//! How fast the gate decides: a 10k-call mixed corpus prepared and decided, in one
//! process, as `tollgate check --calls` does. Run with `cargo bench --bench gate`.

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tollgate::call::{Decider, PreparedCall};
use tollgate::policy::{
    PermissionContext, PermissionMode, Policy, PolicyOrigin, RuleSet, ToolName, Workspace,
};
use tollgate::tools::{Tool, builtin};

fn corpus() -> Vec<(Arc<dyn Tool>, Value)> {
    let kinds: [(&str, Value); 10] = [
        ("Bash", json!({"command": "cargo test --all"})),
        ("Bash", json!({"command": "rm -rf build"})),
        ("Bash", json!({"command": "git status && git diff"})),
        ("Bash", json!({"command": "npm test -- --watch=false"})),
        ("Read", json!({"file_path": "src/lib.rs"})),
        ("Read", json!({"file_path": "/etc/passwd"})),
        ("Write", json!({"file_path": "src/new.rs", "content": "x"})),
        (
            "Edit",
            json!({"file_path": ".git/config", "old_string": "a", "new_string": "b"}),
        ),
        ("Grep", json!({"pattern": "fn main"})),
        ("Glob", json!({"pattern": "**/*.rs"})),
    ];
    (0..10_000)
        .map(|index| {
            let (name, input) = &kinds[index % kinds.len()];
            let tool = ToolName::parse(name).as_ref().and_then(builtin);
            (
                tool.unwrap_or_else(|| panic!("no tool {name}")),
                input.clone(),
            )
        })
        .collect()
}

fn gate(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy_file = root.join("policies/ci-default.yaml");
    let text = std::fs::read_to_string(&policy_file).unwrap_or_else(|err| panic!("{err}"));
    let origin = PolicyOrigin {
        file: &policy_file,
        dir: &root.join("policies"),
        home: None,
    };
    let policy = Policy::parse(&text, origin).unwrap_or_else(|err| panic!("{err}"));
    let rules = RuleSet::from_policy(&policy);
    let workspace = Workspace::new(root.to_path_buf(), vec![], None);
    let ctx = PermissionContext {
        disk: None,
        auto_allow_bash: false,
        mode: PermissionMode::DontAsk,
        rules: &rules,
        workspace: &workspace,
    };
    let calls = corpus();
    let mut group = c.benchmark_group("gate");
    group.throughput(Throughput::Elements(calls.len() as u64));
    group.sample_size(20);
    group.bench_function("decide 10k mixed calls", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for (tool, input) in &calls {
                // As `check --calls` does: prepare the call once and decide it.
                let call = PreparedCall::prepare(tool.clone(), input.clone())
                    .unwrap_or_else(|err| panic!("{err}"));
                allowed += usize::from(Decider::headless(ctx).decide_now(call).is_allowed());
            }
            allowed
        })
    });
    group.finish();
}

criterion_group!(benches, gate);
criterion_main!(benches);
