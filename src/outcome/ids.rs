//! Typed indexes into the registry: a machine's, a model's and a route's place in its
//! [`Table`]. A model index cannot be used where a machine is meant.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Index;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub usize);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<usize> for $name {
            fn from(i: usize) -> $name {
                $name(i)
            }
        }
    };
}

id!(
    /// A machine of the registry (one failure domain, one breaker).
    MachineId
);
id!(
    /// A logical model of the registry: a target of chains.
    ModelId
);
id!(
    /// A route of the registry.
    RouteId
);

/// Items indexed by one kind of id, in registry order.
#[derive(Clone, PartialEq)]
pub struct Table<I, T> {
    items: Vec<T>,
    id: PhantomData<fn() -> I>,
}

impl<I, T: fmt::Debug> fmt::Debug for Table<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}

impl<I, T> Default for Table<I, T> {
    fn default() -> Self {
        Table {
            items: Vec::new(),
            id: PhantomData,
        }
    }
}

impl<I: From<usize> + Copy, T> Table<I, T> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Every item with its id.
    pub fn enumerate(&self) -> impl Iterator<Item = (I, &T)> + '_ {
        self.items.iter().enumerate().map(|(i, t)| (I::from(i), t))
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl Iterator<Item = I> + '_ {
        (0..self.items.len()).map(I::from)
    }

    /// The id of the first item that satisfies `f`.
    pub fn position(&self, f: impl FnMut(&T) -> bool) -> Option<I> {
        self.items.iter().position(f).map(I::from)
    }

    pub fn get(&self, i: I) -> Option<&T>
    where
        I: Into<usize>,
    {
        self.items.get(i.into())
    }

    /// Adds `item` last; its id.
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::from(self.items.len() - 1)
    }

    /// Keeps the first `len` items.
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
    }
}

impl<I, T> From<Vec<T>> for Table<I, T> {
    fn from(items: Vec<T>) -> Self {
        Table {
            items,
            id: PhantomData,
        }
    }
}

impl<I, T> FromIterator<T> for Table<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(it: It) -> Self {
        Table::from(it.into_iter().collect::<Vec<T>>())
    }
}

impl<'a, I, T> IntoIterator for &'a Table<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

macro_rules! index {
    ($name:ident) => {
        impl<T> Index<$name> for Table<$name, T> {
            type Output = T;

            fn index(&self, i: $name) -> &T {
                &self.items[i.0]
            }
        }

        impl From<$name> for usize {
            fn from(i: $name) -> usize {
                i.0
            }
        }
    };
}

index!(MachineId);
index!(ModelId);
index!(RouteId);
