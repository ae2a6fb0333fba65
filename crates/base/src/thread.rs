//! Joining threads: the one place a thread's panic is turned into something a
//! caller records, so no join result is discarded.

use std::any::Any;
use std::thread::JoinHandle;

/// The message a panic carried (`panic!("...")` text), or a stand-in.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Waits for `h`; a panic becomes an error naming the thread (`what`) and what
/// it said, for the caller to record.
pub fn join<T>(h: JoinHandle<T>, what: &str) -> Result<T, String> {
    h.join()
        .map_err(|p| format!("the {what} thread failed: {}", panic_message(p.as_ref())))
}

/// [`join`] where nothing is left to return an error to (a `Drop`, a thread
/// being stopped after its result was taken): a panic is said on stderr.
pub fn join_or_warn<T>(h: JoinHandle<T>, what: &str) -> Option<T> {
    match join(h, what) {
        Ok(v) => Some(v),
        Err(e) => {
            crate::secrets::warn(&format!("mailbench: {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_thread_is_named_with_its_message() {
        let h = std::thread::spawn(|| -> u32 { panic!("disk on fire") });
        let e = join(h, "flusher").unwrap_err();
        assert_eq!(e, "the flusher thread failed: disk on fire");
        let h = std::thread::spawn(|| -> u32 { std::panic::panic_any(7u8) });
        assert!(
            join(h, "x")
                .unwrap_err()
                .ends_with("a panic without a message")
        );
        assert_eq!(join(std::thread::spawn(|| 5), "y"), Ok(5));
    }
}
