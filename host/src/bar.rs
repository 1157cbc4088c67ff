//! Progress bars for long command-line work (`sluice produce`, `sluice maintain`, plugin
//! compiles, `sluice plugin test`): drawn on standard error only when it is a terminal and
//! the logs are text ([`enable`]), so a pipe, a file, a container's log collector or JSON
//! logs never get one. Anything else gets a [`Bar`] that draws nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Lets bars be drawn: the command line calls it once standard error is known to be a
/// terminal and the logs are text.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// A progress bar, or nothing when bars are not drawn. It clears itself when dropped.
#[derive(Debug)]
pub struct Bar(Option<ProgressBar>);

impl Bar {
    /// A bar counting towards `total` (`None`: a count without an end), labelled `what`.
    pub fn counting(what: &str, total: Option<u64>) -> Bar {
        Bar::shown(|| {
            let template = match total {
                Some(_) => "{msg} {wide_bar} {human_pos}/{human_len} ({elapsed}, {eta} left)",
                None => "{spinner} {msg} {human_pos} ({elapsed})",
            };
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
            bar.set_style(ProgressStyle::with_template(template).expect("a valid template"));
            bar.set_message(what.to_string());
            bar
        })
    }

    /// A spinner saying what is being done, for work without steps to count.
    pub fn spinner(what: &str) -> Bar {
        Bar::shown(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})");
            bar.set_style(style.expect("a valid template"));
            bar.set_message(what.to_string());
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        })
    }

    fn shown(make: impl FnOnce() -> ProgressBar) -> Bar {
        Bar(ENABLED.load(Ordering::Relaxed).then(make))
    }

    /// Whether it draws.
    pub fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// `n` more done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Says what is being done now.
    pub fn say(&self, what: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(what.to_string());
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_draw_nothing_until_enabled() {
        assert!(!Bar::counting("events", Some(10)).is_shown());
        assert!(!Bar::spinner("compiling").is_shown());
    }
}
