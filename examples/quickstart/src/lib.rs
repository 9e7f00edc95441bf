/// The greeting the quickstart's agent reads and greps.
pub fn greet(name: &str) -> String {
    format!("hello, {name}")
}

pub fn farewell(name: &str) -> String {
    format!("goodbye, {name}")
}
