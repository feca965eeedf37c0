//! The ready tasks (queued and waiting: not blocked, not running) in run order, kept apart
//! by where they were routed. A tick looks only through the places that may start
//! something — tasks to route, and groups neither parked nor held to one probe — merged
//! back into one run order; so a long queue waiting on a machine that is down costs a tick
//! nothing, and a submit's tick stays as cheap as the tasks that can move.

use std::collections::btree_set::Range;
use std::collections::{BTreeSet, HashMap};
use std::iter::Peekable;
use std::ops::Bound;

use super::{Group, Key};

/// Where a ready task sits: `None` until it is routed, then its group and the registry
/// version it was routed under (the entry's `group`).
pub type Place = Option<(Group, String)>;

/// Ready tasks by place, each place in run order.
#[derive(Default)]
pub struct Ready {
    places: HashMap<Place, BTreeSet<Key>>,
}

impl Ready {
    pub fn insert(&mut self, place: &Place, k: Key) {
        self.places.entry(place.clone()).or_default().insert(k);
    }

    /// Whether `k` was there.
    pub fn remove(&mut self, place: &Place, k: &Key) -> bool {
        let Some(set) = self.places.get_mut(place) else {
            return false;
        };
        let was = set.remove(k);
        if set.is_empty() {
            self.places.remove(place);
        }
        was
    }

    /// The keys of one place, in run order.
    pub fn of(&self, place: &Place) -> impl Iterator<Item = &Key> {
        self.places.get(place).into_iter().flatten()
    }

    /// The keys after `from` of every place `looked` keeps, merged in run order.
    pub fn merged<'a>(
        &'a self,
        from: Bound<&'a Key>,
        looked: impl Fn(&Place) -> bool,
    ) -> Merged<'a> {
        let heads = self
            .places
            .iter()
            .filter(|(place, _)| looked(place))
            .map(|(place, set)| (place, set.range((from, Bound::Unbounded)).peekable()))
            .collect();
        Merged { heads }
    }
}

/// A run-order walk over several places; a place can be dropped part way.
pub struct Merged<'a> {
    heads: Vec<(&'a Place, Peekable<Range<'a, Key>>)>,
}

impl<'a> Merged<'a> {
    /// The next key in run order, with its place.
    pub fn next(&mut self) -> Option<(&'a Place, &'a Key)> {
        self.heads.retain_mut(|(_, it)| it.peek().is_some());
        let (i, _) = self
            .heads
            .iter_mut()
            .enumerate()
            .filter_map(|(i, (_, it))| it.peek().map(|k| (i, *k)))
            .min_by(|a, b| a.1.cmp(b.1))?;
        let (place, it) = &mut self.heads[i];
        it.next().map(|k| (*place, k))
    }

    /// Looks no further in `group`'s places (it is held back for the rest of the tick).
    pub fn drop_group(&mut self, group: &Group) {
        self.heads
            .retain(|(place, _)| place.as_ref().is_none_or(|(g, _)| g != group));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::outcome::ModelId;
    use crate::tasks::model::TaskId;

    fn group(m: usize) -> Group {
        Arc::from(vec![ModelId(m)])
    }

    fn place(m: usize) -> Place {
        Some((group(m), "v1".to_string()))
    }

    #[test]
    fn merged_is_run_order_across_places_and_skips_what_is_not_looked_at() {
        let mut r = Ready::default();
        let ids: Vec<TaskId> = (0..6).map(|_| TaskId::new()).collect();
        // (priority key, order): place 1 holds 0 and 3, place 2 holds 1 and 4, unrouted 2.
        r.insert(&place(1), (0, 0, ids[0].clone()));
        r.insert(&place(2), (0, 1, ids[1].clone()));
        r.insert(&None, (0, 2, ids[2].clone()));
        r.insert(&place(1), (0, 3, ids[3].clone()));
        r.insert(&place(2), (-1, 4, ids[4].clone()));
        r.insert(&place(3), (0, 5, ids[5].clone()));
        let mut m = r.merged(Bound::Unbounded, |p| p != &place(3));
        let mut seen = Vec::new();
        while let Some((_, k)) = m.next() {
            seen.push(k.1);
        }
        assert_eq!(
            seen,
            vec![4, 0, 1, 2, 3],
            "higher priority first, then order"
        );

        let mut m = r.merged(Bound::Unbounded, |_| true);
        assert_eq!(m.next().map(|(_, k)| k.1), Some(4));
        m.drop_group(&group(2));
        let rest: Vec<u64> = std::iter::from_fn(|| m.next().map(|(_, k)| k.1)).collect();
        assert_eq!(
            rest,
            vec![0, 2, 3, 5],
            "a dropped group is looked at no further"
        );

        let from = (0, 2, ids[2].clone());
        let mut m = r.merged(Bound::Excluded(&from), |_| true);
        let rest: Vec<u64> = std::iter::from_fn(|| m.next().map(|(_, k)| k.1)).collect();
        assert_eq!(rest, vec![3, 5], "a chunk resumes after its cursor");
    }

    #[test]
    fn an_emptied_place_is_forgotten() {
        let mut r = Ready::default();
        let k = (0, 0, TaskId::new());
        r.insert(&place(1), k.clone());
        r.remove(&place(1), &k);
        r.remove(&place(2), &k);
        assert!(r.places.is_empty());
        assert_eq!(r.of(&place(1)).count(), 0);
    }
}
