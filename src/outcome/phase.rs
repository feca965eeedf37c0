//! The breaker's phase, as `/status`, the ledger, alerts and the digest name it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Closed,
    Open,
    HalfOpen,
    /// The machine answered 401/403: paused until a reload or a manual reset.
    AuthFailed,
    /// Opened by hand: stays open until closed or reset by hand.
    ForcedOpen,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Closed,
        Phase::Open,
        Phase::HalfOpen,
        Phase::AuthFailed,
        Phase::ForcedOpen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half_open",
            Phase::AuthFailed => "auth_failed",
            Phase::ForcedOpen => "forced_open",
        }
    }

    /// The phase in plain words, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half-open, probing",
            Phase::AuthFailed => "paused: credentials rejected",
            Phase::ForcedOpen => "held open by hand",
        }
    }

    /// Calls are held back in this phase (all but closed).
    pub fn is_down(self) -> bool {
        self != Phase::Closed
    }

    /// Entering this phase from closed is a trip: any down phase but half-open.
    pub fn is_trip(from: Phase, to: Phase) -> bool {
        from == Phase::Closed && to.is_down() && to != Phase::HalfOpen
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored or sent name that is no phase.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown breaker state '{0}'")]
pub struct UnknownPhase(pub String);

impl FromStr for Phase {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Phase, UnknownPhase> {
        Phase::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPhase(crate::text::bounded(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_parse_back_and_match_serde() {
        for p in Phase::ALL {
            assert_eq!(p.as_str().parse::<Phase>(), Ok(p));
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                format!("\"{}\"", p.as_str())
            );
        }
        assert!("opened".parse::<Phase>().is_err());
        assert!(Phase::is_trip(Phase::Closed, Phase::Open));
        assert!(Phase::is_trip(Phase::Closed, Phase::AuthFailed));
        assert!(!Phase::is_trip(Phase::Closed, Phase::HalfOpen));
        assert!(!Phase::is_trip(Phase::HalfOpen, Phase::Open));
    }
}
