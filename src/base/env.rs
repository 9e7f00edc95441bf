//! Which environment variables hold credentials: the shell strips them from the model's
//! commands and the redactor masks their values.

/// Names of environment variables that look like credentials; the model's commands do not
/// inherit them (the task author's checks do).
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_SECRETS", "_CREDENTIALS"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
        || upper.contains("PASSWORD")
        || upper.contains("API_KEY")
}
