//! [`IndexedMap`]: a hash map for the collector's look-ups by connection and by statement,
//! which tries the entry it found last before it hashes.
//!
//! Why: every command is looked up by its connection and its statement in maps the
//! collector keeps (a window slot's statement classes and connections, the findings
//! engine's applications), and consecutive commands mostly share both (a connection's
//! commands come one after another; a loop or a pool's health check repeats one statement).
//! A hash look-up costs some 20 instructions a command each (callgrind,
//! `scripts/bench.sh --only f`); a hit on the last entry is a compare. A reference to the
//! last entry cannot be kept in a map that moves its entries, so they live in a vector
//! (`indexmap`'s), and the map holds where each one is.

use std::hash::Hash;

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

/// Entries in a vector, found through a hash map of their places (`indexmap`), the last one
/// found or added tried first. Iteration order is the entries' (not the keys' hash order):
/// callers that show entries sort them.
#[derive(Clone, Debug)]
pub struct IndexedMap<K, V> {
    entries: IndexMap<K, V, FxBuildHasher>,
    /// The place of the entry found or added last (may be past the end after a removal).
    last: usize,
}

impl<K, V> Default for IndexedMap<K, V> {
    fn default() -> Self {
        IndexedMap { entries: IndexMap::default(), last: 0 }
    }
}

impl<K: Copy + Eq + Hash, V> IndexedMap<K, V> {
    /// Where `key`'s entry is: the last one's place if it is that key's, else the map's.
    #[inline(always)]
    fn place(&self, key: &K) -> Option<usize> {
        match self.entries.get_index(self.last) {
            Some((last, _)) if last == key => Some(self.last),
            _ => self.entries.get_index_of(key),
        }
    }

    /// The value of `key`, if any.
    #[inline(always)]
    pub fn get(&self, key: &K) -> Option<&V> {
        self.place(key).and_then(|i| self.entries.get_index(i)).map(|(_, v)| v)
    }

    /// The value of `key` to change, if any; tried first next time.
    #[inline(always)]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = self.place(key)?;
        self.last = i;
        self.entries.get_index_mut(i).map(|(_, v)| v)
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &K) -> bool {
        self.place(key).is_some()
    }

    /// The value of `key`, made by `make` if there was none.
    #[inline(always)]
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.place(&key) {
            Some(i) => i,
            None => self.push(key, make()),
        };
        self.last = i;
        &mut self.entries[i]
    }

    /// The value of `key`, made by `make` if there was none and it makes one.
    #[inline(always)]
    pub fn get_or_try_insert_with(&mut self, key: K, make: impl FnOnce() -> Option<V>) -> Option<&mut V> {
        let i = match self.place(&key) {
            Some(i) => i,
            None => self.push(key, make()?),
        };
        self.last = i;
        self.entries.get_index_mut(i).map(|(_, v)| v)
    }

    /// Sets `key`'s value, returning the one it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let (i, replaced) = self.entries.insert_full(key, value);
        self.last = i;
        replaced
    }

    /// Adds an entry for a key that has none: its place.
    #[inline(never)]
    fn push(&mut self, key: K, value: V) -> usize {
        self.entries.insert_full(key, value).0
    }

    /// Takes `key`'s value out. The last entry takes its place.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.entries.swap_remove(key)
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keys, in the entries' order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }

    /// Values, in the entries' order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.values()
    }

    /// Values to change, in the entries' order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.values_mut()
    }

    /// Takes every entry out.
    pub fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        self.entries.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap as HashMap;

    /// Whatever was found last, every look-up answers as a plain hash map would, through
    /// insertions, replacements and removals (the last entry moving into a removed one's place).
    #[test]
    fn answers_as_a_hash_map_does() {
        let mut map = IndexedMap::default();
        let mut plain: HashMap<u64, u64> = HashMap::default();
        let mut state = 3u64;
        for step in 0..20_000u64 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (state >> 33) % 40;
            match step % 7 {
                0 => assert_eq!(map.remove(&key), plain.remove(&key), "remove {key}"),
                1 => assert_eq!(map.insert(key, step), plain.insert(key, step), "insert {key}"),
                2 => {
                    let made = map.get_or_try_insert_with(key, || (step % 2 == 0).then_some(step)).map(|v| *v);
                    let expected = match plain.get(&key).copied() {
                        Some(v) => Some(v),
                        None if step % 2 == 0 => {
                            plain.insert(key, step);
                            Some(step)
                        }
                        None => None,
                    };
                    assert_eq!(made, expected, "try insert {key}");
                }
                3 => {
                    *map.get_or_insert_with(key, || 0) += 1;
                    *plain.entry(key).or_insert(0) += 1;
                }
                4 => {
                    if let Some(v) = map.get_mut(&key) {
                        *v += 10;
                    }
                    if let Some(v) = plain.get_mut(&key) {
                        *v += 10;
                    }
                }
                _ => {}
            }
            assert_eq!(map.get(&key), plain.get(&key), "get {key} at {step}");
            assert_eq!(map.contains_key(&key), plain.contains_key(&key));
            assert_eq!(map.len(), plain.len());
        }
        let mut entries: Vec<(u64, u64)> = map.keys().copied().zip(map.values().copied()).collect();
        entries.sort_unstable();
        let mut expected: Vec<(u64, u64)> = plain.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(entries, expected);
        assert_eq!(map.drain().count(), expected.len());
        assert!(map.is_empty() && map.get(&expected.first().map_or(0, |e| e.0)).is_none());
    }
}
