//! Answers kept in memory when the service has no store: for 24 h, and at most
//! [`MEMORY_ENTRIES`] of them holding at most [`MEMORY_BYTES`], oldest out first.

use std::collections::{HashMap, VecDeque};

use super::key::Slot;
use super::{MEMORY_BYTES, MEMORY_ENTRIES};
use crate::store::KeptAnswer;

/// Answers kept in memory when there is no store, oldest first out.
#[derive(Debug, Default)]
pub(super) struct Recent {
    answers: HashMap<Slot, KeptAnswer>,
    /// Insertion order, for eviction; an entry whose answer was replaced is skipped.
    order: VecDeque<(Slot, i64)>,
    bytes: usize,
}

impl Recent {
    pub(super) fn get(&self, slot: &Slot, since_ms: i64) -> Option<&KeptAnswer> {
        self.answers.get(slot).filter(|a| a.created_ms >= since_ms)
    }

    pub(super) fn insert(&mut self, slot: Slot, answer: KeptAnswer, since_ms: i64) {
        self.bytes += answer.body.len();
        self.order.push_back((slot.clone(), answer.created_ms));
        if let Some(old) = self.answers.insert(slot, answer) {
            self.bytes -= old.body.len();
        }
        while let Some((slot, created)) = self.order.front() {
            let over = self.answers.len() > MEMORY_ENTRIES || self.bytes > MEMORY_BYTES;
            if !over && *created >= since_ms {
                break;
            }
            if self
                .answers
                .get(slot)
                .is_some_and(|a| a.created_ms == *created)
            {
                if let Some(gone) = self.answers.remove(slot) {
                    self.bytes -= gone.body.len();
                }
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn kept(n: u8, bytes: usize, created_ms: i64) -> (Slot, KeptAnswer) {
        let slot = Slot {
            owner: String::new(),
            key: format!("{n}"),
        };
        let answer = KeptAnswer {
            owner: String::new(),
            key: slot.key.clone(),
            fingerprint: "f".into(),
            status: 200,
            content_type: None,
            headers: vec![],
            body: Bytes::from(vec![b' '; bytes]),
            created_ms,
        };
        (slot, answer)
    }

    #[test]
    fn memory_is_bounded_by_bytes_and_age_oldest_out_first() {
        let mut r = Recent::default();
        for n in 0..70 {
            let (slot, a) = kept(n, 1 << 20, i64::from(n));
            r.insert(slot, a, 0);
        }
        assert_eq!(r.answers.len(), 64, "64 MiB of 1 MiB answers");
        assert_eq!(r.bytes, 64 << 20);
        assert!(
            r.get(&kept(5, 0, 0).0, 0).is_none(),
            "the oldest went first"
        );
        assert!(r.get(&kept(69, 0, 0).0, 0).is_some());
        assert!(r.get(&kept(69, 0, 0).0, 70).is_none(), "expired");
        // Expired ones go on the next insert.
        let (slot, a) = kept(200, 1, 100);
        r.insert(slot, a, 100);
        assert_eq!(r.answers.len(), 1);
        assert_eq!(r.bytes, 1);
    }
}
