//! The words a run stops with, shared by the workflows: each spelled once, here, as it is
//! written in reports, state files and journals. A workflow sets and compares the enum; the
//! word appears only when it is written out ([`StopReason::as_str`], serde) or read back
//! ([`StopReason::parse`], serde), so a misspelt reason does not compile.

/// Declares an enum of words: each variant with its one spelling on disk, `as_str`, `parse`
/// (None for another word), `Display`, and serde as the word.
macro_rules! words {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)*
        }

        impl $name {
            /// Every word, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$v,)*];

            /// The word as written.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s,)*
                }
            }

            /// The variant `word` spells; None for any other word.
            pub fn parse(word: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|w| w.as_str() == word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<$name> for String {
            fn from(w: $name) -> String {
                w.as_str().to_string()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&word).ok_or_else(|| {
                    serde::de::Error::custom(format!("unknown {}: {word}", stringify!($name)))
                })
            }
        }
    };
}

words! {
    /// Why a task, an iteration or a run stopped without finishing, where more than one
    /// workflow stops for it (implement's report `kind`, a loop run's blocked reason, an until
    /// iteration's decision, an ultra goal's stop).
    pub enum StopReason {
        /// The agent changed what judges it (a test, the suite's configuration, a check).
        CheckTampered => "check-tampered",
        /// The agent changed git's view of the tree (an index flag, an exclude, a hook).
        GitTampered => "git-tampered",
        /// HEAD moved in a way no honest commit moves it.
        HeadMoved => "head-moved",
        /// A later step lost an earlier step's work (snapshot comparison).
        SnapshotLoss => "snapshot-loss",
        /// The run's budget is spent.
        Budget => "budget",
        /// The agent failed consecutive attempts for one cause (the dispatcher's fail-fast
        /// streak tripped).
        AgentFailing => "agent-failing",
    }
}

words! {
    /// Why `work exhaust` stopped: its journal's `stoppedReason`.
    pub enum ExhaustStop {
        /// K rounds in a row found nothing new.
        KDry => "k-consecutive-dry",
        /// No angle and no oracle is left to try.
        Exhausted => "angles-and-oracles-exhausted",
        /// The run's budget is spent.
        Budget => "budget",
        /// The caller's round cap (`--max-rounds`) was reached.
        CallerTarget => "caller-target",
        /// Every finder failed for one cause in consecutive rounds over two angles.
        AgentFailing => "agent-failing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_word_reads_back_as_itself_and_no_other() {
        for w in StopReason::ALL {
            assert_eq!(StopReason::parse(w.as_str()), Some(*w));
            let json = serde_json::to_string(w).expect("write");
            assert_eq!(json, format!("\"{w}\""));
            assert_eq!(serde_json::from_str::<StopReason>(&json).expect("read"), *w);
        }
        for w in ExhaustStop::ALL {
            assert_eq!(ExhaustStop::parse(w.as_str()), Some(*w));
        }
        assert_eq!(StopReason::parse("check_tampered"), None);
        assert!(serde_json::from_str::<ExhaustStop>("\"dry\"").is_err());
    }
}
