//! What the rolling report windows hold, measured with a counting allocator: the soak's
//! shape (1,000 connections, each running a command about every second, latencies from
//! 100 µs to 200 ms) through `report.window_max` of 1-second slots. A past slot is kept for
//! the whole of `window_max` (an hour by default, 60 slots), so its size times the slot count
//! is the windows' memory bound; before slots were packed it was about 10 MiB a slot for
//! 1,000 connections (each connection's latency histogram alone 5–7 KiB).
//!
//! One test in this binary: the allocator counts every thread's allocations.

// A global allocator is unsafe to implement; this one only counts and defers to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use rttscope::fingerprint::{FingerprintId, StatementKind};
use rttscope::live::Legs;
use rttscope::protocol::constants::command::COM_QUERY;
use rttscope::record::{Aggregates, CommandRecord, Connected, Event, Windows};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const S: u64 = 1_000_000;
const CONNECTIONS: u64 = 1000;

#[test]
fn a_past_window_slot_of_a_thousand_connections_is_small() {
    let mut windows = Windows::new(Duration::from_secs(1), Duration::from_secs(3600), 100, 0, Arc::default());
    // The cumulative recording the slots are merged into. It does not grow with the slots
    // kept, but its connections' histograms still fill out over these seconds: a few dozen
    // bytes per connection of the growth measured below are its.
    let mut settled = Aggregates::new(100, 0);
    let legs =
        Legs { client_library: Some("libmariadb 3.3.8".into()), client_program: Some("app".into()), ..Legs::default() };
    for conn_id in 1..=CONNECTIONS {
        windows.apply(
            &Event::Connected(Box::new(Connected {
                conn_id,
                client: Arc::from(format!("10.0.0.1:{}", 40_000 + conn_id)),
                legs: Box::new(legs.clone()),
                user: Arc::from("app"),
                schema: Some(Arc::from("shop")),
                at_us: 0,
            })),
            &mut settled,
        );
    }
    let text: Arc<str> = Arc::from("SELECT c FROM sbtest WHERE id = ?");
    let mut state = 1u64;
    let mut live_after = Vec::new();
    for second in 0..12 {
        for conn_id in 1..=CONNECTIONS {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let latency = 100 + (state >> 33) % 200_000;
            let request = second * S + conn_id * 500;
            let mut r = CommandRecord::new(conn_id, COM_QUERY, FingerprintId(conn_id % 3 + 1), text.clone(), request);
            r.kind = StatementKind::Select;
            r.last_byte_us = request + latency;
            r.first_byte_us = Some(request + latency / 2);
            r.round_trips = 1;
            r.bytes_up = 40;
            r.bytes_down = 120;
            r.rows = 1;
            windows.apply(&Event::Command(Box::new(r)), &mut settled);
        }
        live_after.push(LIVE.load(Ordering::Relaxed));
    }
    // Slots 2 to 10 are past slots by the end of second 11: their growth is a slot's size.
    let per_slot = (live_after[10] - live_after[2]) / 8;
    let per_connection = per_slot / CONNECTIONS as isize;
    eprintln!("a past slot: {per_slot} bytes, {per_connection} per connection");
    assert!(per_connection <= 400, "a past slot holds {per_connection} bytes per connection ({per_slot} in all)");
    assert_eq!(windows.slots(), 12);
}
