//! Taking a lock whatever became of the thread that held it last (a leaf).

use std::sync::{Mutex, MutexGuard};

/// `mutex`, locked. A poisoned lock is taken all the same: what rttscope guards with a mutex
/// (maps of connections, recordings, settings swapped whole) is never left half-changed by a
/// panic, and one connection's panic must not stop every other part that shares the value.
pub fn locked<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::locked;

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let shared = Arc::new(Mutex::new(1));
        let held = shared.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert!(shared.is_poisoned());
        *locked(&shared) += 1;
        assert_eq!(*locked(&shared), 2);
    }
}
