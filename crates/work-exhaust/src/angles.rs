//! The built-in sweep pool: the angles a finder round rotates through when the caller gives
//! none. Each is a distinct modality of looking, so that an exhausted angle is never mistaken
//! for an exhausted territory (the False-DRY guard needs fresh angles to exist).

/// The default angle pool, in the order they are tried.
pub const SWEEP_POOL: &[&str] = &[
    "direct-search",
    "error-paths",
    "edge-cases",
    "input-validation",
    "concurrency-races",
    "state-transitions",
    "resource-lifecycle",
    "configuration",
    "persistence-and-migrations",
    "security-boundaries",
    "api-contracts",
    "cli-and-user-interface",
    "tests-and-fixtures",
    "build-and-tooling",
    "docs-drift",
    "dead-code",
    "logging-and-observability",
    "performance-hotspots",
    "integration-points",
    "background-jobs-and-schedules",
];

/// The default pool as owned strings.
pub fn default_pool() -> Vec<String> {
    SWEEP_POOL.iter().map(|s| s.to_string()).collect()
}
