//! The batch recipes checked by the tools their platforms use: the Kubernetes Indexed Job
//! against Kubernetes' own OpenAPI schemas (`kubernetes-validate` from PyPI, strict: an
//! unknown field fails too). The Actions matrix is linted by actionlint
//! (`.ci/validate-reports.sh`); the Slurm and cron scripts run end to end
//! (`suite::slurm`, `suite::batch`).

use std::process::{Command, Output};

use crate::support::repo_root;
use crate::support::skip::skip;

const MANIFEST: &str = "examples/batch/kubernetes-indexed-job.yaml";

fn validate(path: &std::path::Path) -> Option<Output> {
    let probe = Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .output();
    if !probe.is_ok_and(|out| out.status.success()) {
        skip(
            "python3 cannot import kubernetes_validate (pip install kubernetes-validate; \
             .ci/run installs it)",
        );
        return None;
    }
    Some(
        Command::new("python3")
            .args(["-m", "kubernetes_validate", "--strict"])
            .arg(path)
            .output()
            .unwrap(),
    )
}

#[test]
fn the_indexed_job_passes_kubernetes_schema_and_a_misspelt_field_does_not() {
    let manifest = repo_root().join(MANIFEST);
    let Some(checked) = validate(&manifest) else {
        return;
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(checked.status.success(), "{said}");
    assert!(said.contains("passed for resource job/"), "{said}");

    // The check can fail: the same manifest with one field misspelt is refused.
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("completionMode:"), "{text}");
    let scratch = tempfile::tempdir().unwrap();
    let broken = scratch.path().join("job.yaml");
    std::fs::write(
        &broken,
        text.replacen("completionMode:", "completionMod:", 1),
    )
    .unwrap();
    let refused = validate(&broken).unwrap();
    assert!(
        !refused.status.success(),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
}
