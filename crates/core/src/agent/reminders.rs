//! TodoWrite snapshots re-injected as `<system-reminder>` blocks (S3): the whole list when it
//! changed and every `full_every`-th reminder, a one-line count in between, nothing while
//! the list is empty and unchanged. Pure: the loop appends what this returns.

use crate::tools::{TodoSnapshot, TodoStatus};
pub use crate::transcript::ReminderKind;

#[derive(Debug)]
pub struct Reminders {
    full_every: u32,
    /// The list version the last reminder showed.
    shown: u64,
    /// Reminders since the last full one.
    since_full: u32,
}

impl Reminders {
    pub fn new(full_every: u32) -> Reminders {
        Reminders {
            full_every: full_every.max(1),
            shown: 0,
            since_full: 0,
        }
    }

    /// A resumed run: the list at `version` was already shown.
    pub fn shown(&mut self, version: u64) {
        self.shown = version;
    }

    /// The reminder for the next user message, if one is due.
    pub fn next(&mut self, todos: &TodoSnapshot) -> Option<(ReminderKind, String)> {
        let changed = todos.version != self.shown;
        if !changed && todos.items.is_empty() {
            return None;
        }
        self.shown = todos.version;
        let kind = if changed || self.since_full + 1 >= self.full_every {
            self.since_full = 0;
            ReminderKind::Full
        } else {
            self.since_full += 1;
            ReminderKind::Sparse
        };
        Some((kind, render(kind, todos)))
    }
}

/// The whole list as a reminder, whatever the cadence (a compacted history restates it).
pub fn full(todos: &TodoSnapshot) -> String {
    render(ReminderKind::Full, todos)
}

fn render(kind: ReminderKind, todos: &TodoSnapshot) -> String {
    let (pending, in_progress, completed) = todos.counts();
    let body = match kind {
        ReminderKind::Sparse => format!(
            "Your todo list: {pending} pending, {in_progress} in progress, {completed} completed (unchanged)."
        ),
        ReminderKind::Full if todos.items.is_empty() => {
            "Your todo list is now empty. Use TodoWrite if the task needs a plan.".to_string()
        }
        ReminderKind::Full => {
            let mut text = String::from("Your todo list (keep it current with TodoWrite):");
            for (number, todo) in todos.items.iter().enumerate() {
                let status = match todo.status {
                    TodoStatus::Pending => "pending",
                    TodoStatus::InProgress => "in_progress",
                    TodoStatus::Completed => "completed",
                };
                text.push_str(&format!("\n{}. [{status}] {}", number + 1, todo.content));
            }
            text
        }
    };
    format!("<system-reminder>\n{body}\n</system-reminder>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Todo;

    fn list(version: u64, statuses: &[TodoStatus]) -> TodoSnapshot {
        TodoSnapshot {
            items: statuses
                .iter()
                .enumerate()
                .map(|(i, status)| Todo {
                    content: format!("step {i}"),
                    status: *status,
                    active_form: format!("doing step {i}"),
                })
                .collect(),
            version,
        }
    }

    #[test]
    fn full_on_change_and_every_nth_sparse_between_none_while_empty() {
        use ReminderKind::{Full, Sparse};
        use TodoStatus::{Completed, InProgress, Pending};
        let mut reminders = Reminders::new(3);
        let two = list(1, &[InProgress, Pending]);
        // (the list at this turn, the reminder due)
        let table: Vec<(TodoSnapshot, Option<ReminderKind>)> = vec![
            (TodoSnapshot::default(), None),
            (two.clone(), Some(Full)),
            (two.clone(), Some(Sparse)),
            (two.clone(), Some(Sparse)),
            (two.clone(), Some(Full)),
            (two.clone(), Some(Sparse)),
            (list(2, &[Completed, InProgress]), Some(Full)),
            (list(3, &[]), Some(Full)),
            (list(3, &[]), None),
        ];
        for (turn, (todos, due)) in table.into_iter().enumerate() {
            assert_eq!(
                reminders.next(&todos).map(|(kind, _)| kind),
                due,
                "turn {turn}"
            );
        }
    }

    #[test]
    fn a_full_reminder_lists_every_item_with_its_status() {
        let mut reminders = Reminders::new(5);
        let (_, text) = reminders
            .next(&list(1, &[TodoStatus::Completed, TodoStatus::Pending]))
            .unwrap();
        assert_eq!(
            text,
            "<system-reminder>\nYour todo list (keep it current with TodoWrite):\n1. [completed] step 0\n2. [pending] step 1\n</system-reminder>"
        );
        let (_, sparse) = reminders
            .next(&list(1, &[TodoStatus::Completed, TodoStatus::Pending]))
            .unwrap();
        assert!(
            sparse.contains("1 pending, 0 in progress, 1 completed"),
            "{sparse}"
        );
    }
}
