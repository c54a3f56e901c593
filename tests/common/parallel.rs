//! Sweeps over every fixture, spread over the cores.
//!
//! A sweep is one `#[test]` that replays some fifty fixtures one after another; libtest gives
//! it one thread, so on a two-core machine it ran on half the machine while the binary's other
//! tests had long finished. [`map`] hands the items to a few threads, each taking the next item
//! when it finishes one (fixtures differ tenfold in cost: an even split leaves one thread with
//! the slow ones), and returns the results in the items' order, so what a sweep reports does
//! not depend on which thread was faster.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads for one sweep: the cores, at least two (the sweeps start gpudoctor processes and
/// wait on them) and at most four (more only multiplies scratch trees and memory).
pub fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4)
}

/// `f` over every item on [`workers`] threads; the results in the items' order. A panic in `f`
/// (a failed assertion) fails the calling test once every thread has stopped, its message
/// printed where it happened.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers().min(items.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// [`map`] for a sweep whose assertions are all inside `f`.
pub fn for_each<T: Sync>(items: &[T], f: impl Fn(&T) + Sync) {
    map(items, f);
}
