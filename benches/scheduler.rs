//! The scheduler's speed (S6): 8 concurrency-safe calls of ~100 ms each must finish in at
//! most 1.2× the slowest, and the cost per call with no-op tools. `cargo bench --bench scheduler`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tollgate::base::AbortHandle;
use tollgate::call::{Concurrency, PreparedCall, Scheduling};
use tollgate::policy::{PermissionContext, ToolCheck, ToolName, Workspace};
use tollgate::scheduler::{Admission, Call, Landing, TurnHost, run_turn};
use tollgate::tools::{
    FileStateCache, InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput,
    ToolLimits, ToolOutput,
};
use tollgate::transcript::ProgressUpdate;

/// Sleeps for `input.ms` (a stand-in for a Read or Grep that waits on the disk).
struct Sleeper;

struct Sleep {
    ms: u64,
    safe: bool,
}

impl Tool for Sleeper {
    fn name(&self) -> ToolName {
        ToolName::Read
    }
    fn description(&self) -> std::borrow::Cow<'static, str> {
        "sleeps".into()
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }
    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        Ok(Box::new(Sleep {
            ms: input["ms"].as_u64().unwrap_or(0),
            safe: input["safe"] == true,
        }))
    }
}

impl ToolInput for Sleep {
    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        self.safe
    }
    fn check_permissions(&self, _ctx: &PermissionContext) -> ToolCheck {
        ToolCheck::Passthrough {
            reason: "the scheduler bench never gates".into(),
        }
    }
    fn run<'a>(&'a self, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            if self.ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.ms)).await;
            }
            Ok(ToolOutput::new("done"))
        })
    }
}

struct Host(Arc<dyn Tool>);

fn scheduling(call: &Call) -> Scheduling {
    Scheduling {
        concurrency: if call.input["safe"] == true {
            Concurrency::Shared
        } else {
            Concurrency::Exclusive
        },
        interrupt: InterruptBehavior::Cancel,
    }
}

impl TurnHost for Host {
    type Error = Infallible;
    fn scheduling(&self, _index: usize, call: &Call) -> Option<Scheduling> {
        Some(scheduling(call))
    }
    async fn admit(&mut self, _index: usize, call: &Call) -> Result<Admission, Infallible> {
        let prepared = PreparedCall::prepare(self.0.clone(), call.input.clone()).unwrap();
        Ok(Admission::Run {
            scheduling: scheduling(call),
            call: Arc::new(prepared),
            deadline: None,
            basis: tollgate::policy::AllowBasis::Granted,
        })
    }
    async fn land(&mut self, _: usize, _: &Call, landing: Landing) -> Result<(), Infallible> {
        assert!(matches!(landing, Landing::Ran { result: Ok(_), .. }));
        Ok(())
    }
    fn progress(&mut self, _: &Call, _: ProgressUpdate) -> Result<(), Infallible> {
        Ok(())
    }
}

fn calls(count: usize, ms: u64, safe: bool) -> Vec<Call> {
    (0..count)
        .map(|i| Call {
            id: format!("t{i}"),
            name: ToolName::Read,
            input: json!({"ms": ms, "safe": safe}),
        })
        .collect()
}

fn context() -> (ToolContext, AbortHandle) {
    let (handle, abort) = AbortHandle::new();
    let ctx = ToolContext {
        resolver: Default::default(),
        workspace: Arc::new(Workspace::new("/".into(), vec![], None)),
        rules: Arc::default(),
        limits: ToolLimits::default(),
        abort,
        files: FileStateCache::default(),
        command_env: tollgate::exec::RunEnv::new(&Default::default()).model,
        progress: None,
        sandbox: None,
        read_only: None,
        allow_basis: Default::default(),
        state: Default::default(),
    };
    (ctx, handle)
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (ctx, _handle) = context();
    let mut host = Host(Arc::new(Sleeper));

    let eight = calls(8, 100, true);
    let mut group = c.benchmark_group("parallel");
    group.sample_size(10);
    group.bench_function("8 safe calls of 100 ms", |b| {
        b.iter(|| runtime.block_on(run_turn(&mut host, &eight, &ctx, 10, None)))
    });
    group.finish();
    let started = Instant::now();
    let rounds = 10;
    for _ in 0..rounds {
        runtime
            .block_on(run_turn(&mut host, &eight, &ctx, 10, None))
            .unwrap();
    }
    let ratio = started.elapsed().as_secs_f64() / rounds as f64 / 0.1;
    println!("| 8 safe calls of 100 ms | {ratio:.3}× the slowest call |");
    assert!(ratio <= 1.2, "8 safe calls took {ratio:.3}× the slowest");

    for (label, safe) in [("safe", true), ("unsafe", false)] {
        let batch = calls(100, 0, safe);
        c.bench_function(&format!("100 no-op {label} calls"), |b| {
            b.iter(|| runtime.block_on(run_turn(&mut host, &batch, &ctx, 10, None)))
        });
        let started = Instant::now();
        let rounds = 200;
        for _ in 0..rounds {
            runtime
                .block_on(run_turn(&mut host, &batch, &ctx, 10, None))
                .unwrap();
        }
        let per_call = started.elapsed().as_secs_f64() * 1e6 / (rounds * batch.len()) as f64;
        println!("| overhead per no-op {label} call | {per_call:.1} µs |");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
